// Sampler: greedy, top-k, top-p and seeding, checked with exact expectations and
// with frequencies over many draws (fixed seed, so the test is deterministic).
#include "TopKReference.h"
#include "ninfer/Sampler.h"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <map>
#include <random>

namespace ninfer {
namespace {

std::vector<float> randomLogits(int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> logits(vocab);
  for (float& l : logits)
    l = float(rng() % 10000) / 1000.0f - 5.0f;
  return logits;
}

// Logits whose softmax at temperature 1 is exactly `probs`.
std::vector<float> logitsFor(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs)
    logits.push_back(p > 0 ? float(std::log(p)) : -INFINITY);
  return logits;
}

std::map<int32_t, int> histogram(Sampler& sampler, const std::vector<float>& logits, int draws) {
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i)
    ++counts[sampler.sample(logits.data(), int(logits.size()))];
  return counts;
}

TEST(Sampler, GreedyIsArgmaxWithLowestIndexOnTies) {
  Sampler greedy(SamplingParams{});
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
  EXPECT_EQ(greedy.sample(logits.data(), 5), 1);
  const std::vector<float> withNan = {NAN, -3.0f, -2.0f};
  EXPECT_EQ(greedy.sample(withNan.data(), 3), 2);
  const std::vector<float> allEqual(7, -INFINITY);
  EXPECT_EQ(greedy.sample(allEqual.data(), 7), 0);
  const std::vector<float> allNan(4, NAN);
  EXPECT_EQ(argmaxToken(allNan.data(), 4), 0);
  EXPECT_EQ(argmaxToken(logits.data(), 5), 1);
  EXPECT_TRUE(greedy.greedy());
}

TEST(Sampler, TopKOneEqualsGreedy) {
  SamplingParams params;
  params.temperature = 1.5f;
  params.topK = 1;
  params.seed = 9;
  Sampler topOne(params);
  EXPECT_TRUE(topOne.greedy());
  params.topK = 2;
  EXPECT_FALSE(Sampler(params).greedy());
  Sampler greedy(SamplingParams{});
  for (uint32_t seed = 0; seed < 50; ++seed) {
    const std::vector<float> logits = randomLogits(1000, seed);
    EXPECT_EQ(topOne.sample(logits.data(), 1000), greedy.sample(logits.data(), 1000));
  }
}

TEST(Sampler, SameSeedSameSequenceOtherSeedOtherSequence) {
  SamplingParams params;
  params.temperature = 1.0f;
  params.topP = 0.95f;
  params.topK = 50;
  params.seed = 1234;
  const std::vector<float> logits = randomLogits(500, 5);
  auto sequence = [&](uint64_t seed) {
    SamplingParams p = params;
    p.seed = seed;
    Sampler sampler(p);
    std::vector<int32_t> ids;
    for (int i = 0; i < 64; ++i)
      ids.push_back(sampler.sample(logits.data(), 500));
    return ids;
  };
  EXPECT_EQ(sequence(1234), sequence(1234));
  EXPECT_NE(sequence(1234), sequence(1235));
}

TEST(Sampler, TemperatureOneFollowsSoftmax) {
  SamplingParams params;
  params.temperature = 1.0f;
  params.seed = 3;
  Sampler sampler(params);
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  const int draws = 40000;
  auto counts = histogram(sampler, logitsFor(probs), draws);
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(double(counts[i]) / draws, probs[i], 0.01) << i;
}

TEST(Sampler, TemperatureSharpens) {
  // At T = 0.5 probabilities go as p^2: 1/30, 4/30, 9/30, 16/30.
  SamplingParams params;
  params.temperature = 0.5f;
  params.seed = 4;
  Sampler sampler(params);
  const int draws = 40000;
  auto counts = histogram(sampler, logitsFor({0.1, 0.2, 0.3, 0.4}), draws);
  const double expected[4] = {1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0};
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(double(counts[i]) / draws, expected[i], 0.01) << i;
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  // Sorted probabilities 0.5, 0.3, 0.15, 0.05 (ids shuffled). top_p = 0.75:
  // 0.5 < 0.75 <= 0.8, so exactly the two most likely tokens remain, renormalized
  // to 0.625 / 0.375.
  SamplingParams params;
  params.temperature = 1.0f;
  params.topP = 0.75f;
  params.seed = 5;
  Sampler sampler(params);
  const std::vector<double> probs = {0.05, 0.3, 0.15, 0.5};
  const int draws = 40000;
  auto counts = histogram(sampler, logitsFor(probs), draws);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts.count(0) + counts.count(2), 0u);
  EXPECT_NEAR(double(counts[3]) / draws, 0.625, 0.01);
  EXPECT_NEAR(double(counts[1]) / draws, 0.375, 0.01);

  // top_p = 0.85 needs the third token too.
  params.topP = 0.85f;
  Sampler wider(params);
  auto widerCounts = histogram(wider, logitsFor(probs), draws);
  EXPECT_EQ(widerCounts.size(), 3u);
  EXPECT_EQ(widerCounts.count(0), 0u);
  EXPECT_NEAR(double(widerCounts[2]) / draws, 0.15 / 0.95, 0.01);

  // A tiny top_p keeps only the most likely token.
  params.topP = 0.01f;
  Sampler narrow(params);
  auto narrowCounts = histogram(narrow, logitsFor(probs), 1000);
  EXPECT_EQ(narrowCounts.size(), 1u);
  EXPECT_EQ(narrowCounts[3], 1000);
}

// Top-p by its plain definition: the non-NaN logits sorted (higher first, lower id first among
// equal ones), weights float(exp(double(l - max) / T)) summed in that order, the shortest
// prefix reaching top_p of the total, then the first of its entries whose running sum passes
// u times the prefix's (its last where none does); the argmax where the max is not finite.
int32_t sortedTopP(const std::vector<float>& row, float temperature, float topP, double u) {
  std::vector<std::pair<float, int32_t>> v;
  for (size_t i = 0; i < row.size(); ++i)
    if (!std::isnan(row[i]))
      v.emplace_back(row[i], int32_t(i));
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  if (!std::isfinite(v[0].first))
    return v[0].second;
  std::vector<double> w;
  double total = 0;
  for (const auto& e : v) {
    w.push_back(float(std::exp(double(e.first - v[0].first) / temperature)));
    total += w.back();
  }
  double cumulative = 0;
  size_t cut = 0;
  while (cut < v.size()) {
    cumulative += w[cut++];
    if (cumulative >= double(topP) * total)
      break;
  }
  double running = 0;
  for (size_t i = 0; i < cut; ++i) {
    running += w[i];
    if (u * cumulative < running)
      return v[i].second;
  }
  return v[cut - 1].second;
}

// Top-p without top-k draws what the plain definition draws (the sampler selects instead of
// sorting): rows of 100 to 128,256 logits, peaked, flat, with many ties, NaN and -inf, for
// several temperatures, top-p and uniforms (0 and the largest below 1 among them).
TEST(Sampler, TopPDrawsWhatASortedRowDraws) {
  std::mt19937 rng(17);
  std::vector<std::vector<float>> rows;
  for (int width : {100, 3000, 128256}) {
    rows.push_back(randomLogits(width, uint32_t(width))); // a 0.001 grid: many ties
    std::vector<float> peaked(static_cast<size_t>(width), 0.0f);
    for (float& l : peaked)
      l = float(rng() % 1000) / 100.0f;
    peaked[size_t(width) / 3] = 40.0f;
    rows.push_back(peaked);
    rows.push_back(std::vector<float>(size_t(width), 1.5f));
    std::vector<float> holes = randomLogits(width, uint32_t(width) + 1);
    for (size_t i = 0; i < holes.size(); i += 3)
      holes[i] = i % 2 ? NAN : -INFINITY;
    rows.push_back(holes);
  }
  rows.push_back(std::vector<float>(500, -INFINITY));
  std::vector<float> infinite = randomLogits(500, 3);
  infinite[250] = INFINITY;
  rows.push_back(infinite);
  rows.push_back(std::vector<float>(500, NAN));
  std::mt19937_64 uniforms(23);
  for (float temperature : {0.1f, 0.7f, 1.0f, 3.0f})
    for (float topP : {0.99f, 0.9f, 0.5f, 0.001f}) {
      SamplingParams params;
      params.temperature = temperature;
      params.topP = topP;
      Sampler sampler(params);
      for (size_t r = 0; r < rows.size(); ++r)
        for (int i = 0; i < 6; ++i) {
          const double u = i == 0   ? 0.0
                           : i == 1 ? 1.0 - 1.0 / 9007199254740992.0
                                    : double(uniforms() >> 11) * (1.0 / 9007199254740992.0);
          EXPECT_EQ(sampler.sampleWith(rows[r].data(), int(rows[r].size()), u),
                    sortedTopP(rows[r], temperature, topP, u))
              << "temperature " << temperature << ", top-p " << topP << ", row " << r
              << " of " << rows[r].size() << ", uniform " << u;
        }
    }
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  SamplingParams params;
  params.temperature = 1.0f;
  params.topK = 2;
  params.seed = 6;
  Sampler sampler(params);
  const int draws = 30000;
  auto counts = histogram(sampler, logitsFor({0.1, 0.4, 0.2, 0.3}), draws);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_NEAR(double(counts[1]) / draws, 4.0 / 7.0, 0.01);
  EXPECT_NEAR(double(counts[3]) / draws, 3.0 / 7.0, 0.01);
}

// sampleTopK() on a row's candidates draws what sample() draws on the whole row, with the
// same random numbers: rows with ties, NaN, fewer valid logits than k, and +-inf.
TEST(Sampler, TopKCandidatesDrawWhatTheLogitsDraw) {
  std::vector<std::vector<float>> rows;
  for (uint32_t seed = 0; seed < 6; ++seed)
    rows.push_back(randomLogits(3000, seed)); // values on a 0.001 grid: many ties
  rows[1][7] = rows[1][2999] = 9.0f;
  for (size_t i = 0; i < rows[2].size(); ++i)
    if (i % 3)
      rows[2][i] = NAN;
  std::vector<float> fewValid(3000, NAN);
  fewValid[5] = 1.0f, fewValid[900] = 2.0f, fewValid[17] = 2.0f;
  rows.push_back(fewValid);
  std::vector<float> infinite = randomLogits(3000, 9);
  infinite[40] = INFINITY;
  infinite[20] = INFINITY;
  rows.push_back(infinite);
  rows.push_back(std::vector<float>(3000, -INFINITY));
  rows.push_back(std::vector<float>(3000, NAN));
  for (int k : {2, 5, 40, kMaxTopKCandidates})
    for (float topP : {1.0f, 0.9f, 0.3f})
      for (float temperature : {0.5f, 1.0f, 2.0f}) {
        SamplingParams params;
        params.temperature = temperature;
        params.topK = k;
        params.topP = topP;
        params.seed = uint64_t(k) * 31 + uint64_t(topP * 10);
        Sampler whole(params), fromCandidates(params);
        ASSERT_EQ(fromCandidates.candidatesK(), k);
        for (int round = 0; round < 20; ++round)
          for (size_t r = 0; r < rows.size(); ++r) {
            const TopKCandidates c = test::topKReference(rows[r].data(), 3000, k);
            EXPECT_EQ(fromCandidates.sampleTopK(c), whole.sample(rows[r].data(), 3000))
                << "k " << k << ", top-p " << topP << ", temperature " << temperature << ", row "
                << r << ", round " << round;
          }
      }
  SamplingParams params;
  params.temperature = 1.0f;
  EXPECT_EQ(Sampler(params).candidatesK(), 0); // no top-k: the whole row
  params.topK = kMaxTopKCandidates + 1;
  EXPECT_EQ(Sampler(params).candidatesK(), 0);
  params.topK = 1;
  EXPECT_EQ(Sampler(params).candidatesK(), 0); // greedy
}

// sampleTopP() on a row's 64 highest candidates and its mass draws what sampleWith() draws
// on the whole row with the same uniform, or gives -1 where the nucleus reaches past the
// candidates: random rows (many ties), NaN, fewer valid logits than candidates, +-inf, and a
// flat row, whose nucleus holds most of it.
TEST(Sampler, TopPCandidatesDrawWhatTheLogitsDraw) {
  std::vector<std::vector<float>> rows;
  for (uint32_t seed = 0; seed < 4; ++seed)
    rows.push_back(randomLogits(3000, seed));
  for (size_t i = 0; i < rows[1].size(); ++i)
    if (i % 3)
      rows[1][i] = NAN;
  std::vector<float> fewValid(3000, NAN);
  fewValid[5] = 1.0f, fewValid[900] = 2.0f, fewValid[17] = 2.0f;
  rows.push_back(fewValid);
  std::vector<float> infinite = randomLogits(3000, 9);
  infinite[40] = INFINITY;
  rows.push_back(infinite);
  rows.push_back(std::vector<float>(3000, -INFINITY));
  rows.push_back(std::vector<float>(3000, NAN));
  rows.push_back(std::vector<float>(3000, 0.25f));
  std::mt19937_64 rng(21);
  int drawn = 0, past = 0;
  for (float topP : {0.95f, 0.5f, 0.05f})
    for (float temperature : {0.05f, 0.3f, 1.0f}) {
      SamplingParams params;
      params.temperature = temperature;
      params.topP = topP;
      Sampler whole(params), fromCandidates(params);
      ASSERT_TRUE(fromCandidates.topPOnly());
      for (size_t r = 0; r < rows.size(); ++r)
        for (int i = 0; i < 8; ++i) {
          const double u = double(rng() >> 11) * (1.0 / 9007199254740992.0);
          const TopKCandidates c = test::topKReference(rows[r].data(), 3000, kMaxTopKCandidates);
          const double mass = test::nucleusMass(rows[r].data(), 3000, temperature);
          const int32_t id = fromCandidates.sampleTopP(c, mass, u);
          if (id < 0) {
            ++past;
            continue;
          }
          ++drawn;
          EXPECT_EQ(id, whole.sampleWith(rows[r].data(), 3000, u))
              << "top-p " << topP << ", temperature " << temperature << ", row " << r;
        }
    }
  EXPECT_GT(drawn, 0);
  EXPECT_GT(past, 0); // the flat row, at least
  SamplingParams params;
  params.temperature = 1.0f;
  params.topP = 0.9f;
  EXPECT_TRUE(Sampler(params).topPOnly());
  params.topK = 40;
  EXPECT_FALSE(Sampler(params).topPOnly()); // top-k takes the candidates' path
  params.topK = 0;
  params.topP = 1.0f;
  EXPECT_FALSE(Sampler(params).topPOnly());
  params.topP = 0.9f;
  params.temperature = 0.0f;
  EXPECT_FALSE(Sampler(params).topPOnly()); // greedy
}

// sampleWith() with nextUniform() of a sampler seeded alike draws what sample() draws, for
// every kind of sampling (the executor's temperature sampling takes that path), and a
// sample() of a row with no distribution (all -inf, +inf present, all NaN) takes a uniform
// too, so the next draws stay in step.
TEST(Sampler, SampleWithTheNextUniformIsSample) {
  std::vector<std::vector<float>> rows;
  for (uint32_t seed = 0; seed < 4; ++seed)
    rows.push_back(randomLogits(2000, seed));
  rows.push_back(std::vector<float>(2000, -INFINITY));
  std::vector<float> infinite = randomLogits(2000, 7);
  infinite[1500] = INFINITY;
  rows.push_back(infinite);
  rows.push_back(std::vector<float>(2000, NAN));
  rows.push_back(randomLogits(2000, 8));
  for (int k : {0, 5})
    for (float topP : {1.0f, 0.8f})
      for (float temperature : {0.3f, 1.0f, 1.7f}) {
        SamplingParams params;
        params.temperature = temperature;
        params.topK = k;
        params.topP = topP;
        params.seed = 77;
        Sampler sampler(params), twin(params);
        EXPECT_EQ(twin.temperatureOnly(), k == 0 && topP == 1.0f);
        EXPECT_EQ(twin.temperature(), temperature);
        for (int round = 0; round < 30; ++round)
          for (size_t r = 0; r < rows.size(); ++r)
            EXPECT_EQ(twin.sampleWith(rows[r].data(), 2000, twin.nextUniform()),
                      sampler.sample(rows[r].data(), 2000))
                << "k " << k << ", top-p " << topP << ", temperature " << temperature << ", row "
                << r << ", round " << round;
      }
  SamplingParams greedy;
  EXPECT_FALSE(Sampler(greedy).temperatureOnly());
}

} // namespace
} // namespace ninfer
