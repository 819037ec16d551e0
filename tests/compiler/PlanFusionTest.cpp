// fuseResidualAdds on hand-built plans: the fused shape, and each hazard that
// must keep the add separate.
#include "codegen/PlanFusion.h"

#include <gtest/gtest.h>

namespace ninfer {
namespace {

using plan::BufferKind;

struct PlanMaker {
  plan::PlanT plan;
  uint32_t buffer(BufferKind kind, uint64_t offset, uint64_t size) {
    auto b = std::make_unique<plan::BufferT>();
    b->kind = kind;
    b->dtype = plan::DType::F32;
    b->offset = offset;
    b->size_bytes = size;
    plan.buffers.push_back(std::move(b));
    return static_cast<uint32_t>(plan.buffers.size() - 1);
  }
  void linear(uint32_t x, uint32_t w, uint32_t y) {
    auto op = std::make_unique<plan::OpT>();
    plan::LinearAttrsT a;
    a.in_features = 4;
    a.out_features = 4;
    op->attrs.Set(a);
    op->inputs = {x, w};
    op->outputs = {y};
    plan.ops.push_back(std::move(op));
  }
  void add(uint32_t a, uint32_t b, uint32_t y) {
    auto op = std::make_unique<plan::OpT>();
    plan::AddAttrsT attrs;
    attrs.dim = 4;
    op->attrs.Set(attrs);
    op->inputs = {a, b};
    op->outputs = {y};
    plan.ops.push_back(std::move(op));
  }
};

// hidden [0, 64), x [64, 128), w weight, linear out [128, 192).
struct Layer : PlanMaker {
  uint32_t hidden = buffer(BufferKind::Activation, 0, 64);
  uint32_t x = buffer(BufferKind::Activation, 64, 64);
  uint32_t w = buffer(BufferKind::Weight, 0, 64);
  uint32_t out = buffer(BufferKind::Activation, 128, 64);
};

TEST(PlanFusion, FoldsTheAddIntoTheLinearInPlaceOnTheResidual) {
  Layer l;
  l.linear(l.x, l.w, l.out);
  l.add(l.hidden, l.out, l.hidden);
  EXPECT_EQ(fuseResidualAdds(l.plan), 1);
  ASSERT_EQ(l.plan.ops.size(), 1u);
  const plan::OpT &op = *l.plan.ops[0];
  ASSERT_EQ(op.attrs.type, plan::OpAttrs::LinearAttrs);
  EXPECT_TRUE(op.attrs.AsLinearAttrs()->residual);
  EXPECT_EQ(op.inputs, (std::vector<uint32_t>{l.x, l.w, l.hidden}));
  EXPECT_EQ(op.outputs, (std::vector<uint32_t>{l.hidden}));
}

TEST(PlanFusion, AcceptsTheLinearOutputAsTheAddsSecondOperandToo) {
  Layer l;
  uint32_t sum = l.buffer(BufferKind::Activation, 192, 64);
  l.linear(l.x, l.w, l.out);
  l.add(l.out, l.hidden, sum);
  EXPECT_EQ(fuseResidualAdds(l.plan), 1);
  EXPECT_EQ(l.plan.ops[0]->inputs.back(), l.hidden);
  EXPECT_EQ(l.plan.ops[0]->outputs[0], sum);
}

TEST(PlanFusion, KeepsTheAddWhenItsOutputOverlapsTheLinearInput) {
  Layer l;
  uint32_t overX = l.buffer(BufferKind::Activation, 96, 64); // straddles x
  l.linear(l.x, l.w, l.out);
  l.add(l.hidden, l.out, overX);
  EXPECT_EQ(fuseResidualAdds(l.plan), 0);
  EXPECT_EQ(l.plan.ops.size(), 2u);
}

TEST(PlanFusion, KeepsTheAddWhenTheLinearOutputHasAnotherReader) {
  Layer l;
  uint32_t other = l.buffer(BufferKind::Activation, 192, 64);
  l.linear(l.x, l.w, l.out);
  l.add(l.hidden, l.out, l.hidden);
  l.add(l.out, l.out, other);
  EXPECT_EQ(fuseResidualAdds(l.plan), 0);
  EXPECT_EQ(l.plan.ops.size(), 3u);
}

TEST(PlanFusion, KeepsTheAddWhenItsOutputPartlyOverlapsTheResidual) {
  Layer l;
  uint32_t shifted = l.buffer(BufferKind::Activation, 16, 64); // inside hidden, other start
  l.linear(l.x, l.w, l.out);
  l.add(l.hidden, l.out, shifted);
  EXPECT_EQ(fuseResidualAdds(l.plan), 0);
}

TEST(PlanFusion, NeverFusesIntoALastRowOnlyLinearOrANonAdjacentOne) {
  Layer l;
  l.linear(l.x, l.w, l.out);
  l.plan.ops[0]->attrs.AsLinearAttrs()->last_row_only = true;
  l.add(l.hidden, l.out, l.hidden);
  EXPECT_EQ(fuseResidualAdds(l.plan), 0);

  Layer m;
  uint32_t y = m.buffer(BufferKind::Activation, 192, 64);
  m.linear(m.x, m.w, m.out);
  m.add(m.x, m.x, y); // something in between
  m.add(m.hidden, m.out, m.hidden);
  EXPECT_EQ(fuseResidualAdds(m.plan), 0);
}

} // namespace
} // namespace ninfer
