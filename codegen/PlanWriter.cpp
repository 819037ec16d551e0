// Plan writer: packs the plan object into a size-prefixed flatbuffer ("NPLN"),
// pads to kWeightAlignment, then streams every non-dummy weight segment to
// weights_file_offset + buffer.offset, through an AtomicFile: no half-written plan
// is ever left behind.
#include "PlanWriter.h"

#include "ninfer/AtomicFile.h"
#include "ninfer/Format.h"

#include <algorithm>
#include <vector>

namespace ninfer {

Status writePlan(const std::string &path, plan::PlanT &plan, const WeightSource &weights) {
  // Lay out the weight area: segments at their planned offsets, which must be
  // aligned and must not overlap.
  struct Segment {
    uint64_t offset;
    uint64_t size;
    const plan::BufferT *buffer;
  };
  std::vector<Segment> segments;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const plan::BufferT *buffer = plan.buffers[i].get();
    if (!buffer)
      return Status::error("buffer " + std::to_string(i) + " is missing");
    if (buffer->kind != plan::BufferKind::Weight || buffer->dummy || buffer->size_bytes == 0)
      continue;
    if (buffer->offset % kWeightAlignment != 0)
      return Status::error("weight buffer " + std::to_string(i) + " '" + buffer->name +
                           "' has offset " + std::to_string(buffer->offset) +
                           ", not a multiple of " + std::to_string(kWeightAlignment));
    segments.push_back({buffer->offset, buffer->size_bytes, buffer});
  }
  std::sort(segments.begin(), segments.end(),
            [](const Segment &a, const Segment &b) { return a.offset < b.offset; });
  uint64_t weightsEnd = 0;
  for (const Segment &segment : segments) {
    if (segment.offset < weightsEnd)
      return Status::error("weight buffer '" + segment.buffer->name +
                           "' overlaps the previous one");
    weightsEnd = segment.offset + segment.size;
  }

  plan.format_version = formatVersionFor(plan.max_batch);
  plan.weights_size = alignUp(weightsEnd, kWeightAlignment);
  // weights_file_offset depends on the flatbuffer's size; a non-zero value
  // always occupies the same 8 bytes, so the size is stable after one pass.
  flatbuffers::FlatBufferBuilder builder;
  plan.weights_file_offset = kWeightAlignment;
  for (int pass = 0; pass < 4; ++pass) {
    builder.Clear();
    plan::FinishSizePrefixedPlanBuffer(builder, plan::Plan::Pack(builder, &plan));
    const uint64_t needed = alignUp(builder.GetSize(), kWeightAlignment);
    if (needed == plan.weights_file_offset)
      break;
    plan.weights_file_offset = needed;
  }
  if (alignUp(builder.GetSize(), kWeightAlignment) != plan.weights_file_offset)
    return Status::error("internal error: plan header size did not settle");
  if (builder.GetSize() >= (1ull << 31) - 1)
    return Status::error("plan header exceeds the 2 GiB flatbuffer limit");

  AtomicFile temp(path);
  NINFER_RETURN_IF_ERROR(temp.open());
  NINFER_RETURN_IF_ERROR(temp.write(builder.GetBufferPointer(), builder.GetSize()));
  NINFER_RETURN_IF_ERROR(temp.zeros(plan.weights_file_offset - builder.GetSize()));
  uint64_t written = 0; // bytes of the weight area written so far
  for (const Segment &segment : segments) {
    const uint8_t *data = weights ? weights(*segment.buffer) : nullptr;
    if (!data)
      return Status::error("no data for weight '" + segment.buffer->name + "'");
    NINFER_RETURN_IF_ERROR(temp.zeros(segment.offset - written));
    NINFER_RETURN_IF_ERROR(temp.write(data, segment.size));
    written = segment.offset + segment.size;
  }
  NINFER_RETURN_IF_ERROR(temp.zeros(plan.weights_size - written));
  return temp.commit();
}

} // namespace ninfer
