/*
 * Copyright 2021 Google Inc. All rights reserved.
 *
 * Licensed under the Apache License, Version 2.0 (the "License");
 * you may not use this file except in compliance with the License.
 * You may obtain a copy of the License at
 *
 *     http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 */

#ifndef FLATBUFFERS_BFBS_GENERATOR_H_
#define FLATBUFFERS_BFBS_GENERATOR_H_

#include <cstdint>

namespace flatbuffers {

enum GeneratorStatus {
  OK,
  FAILED,
  FAILED_VERIFICATION,
};

// A Flatbuffer Code Generator that receives a binary serialized reflection.fbs
// and generates code from it.
class BfbsGenerator {
 public:
  virtual ~BfbsGenerator() {}

  // Generate code from the provided `buffer` of given `length`. The buffer is
  // a serialized reflection.fbs.
  virtual GeneratorStatus Generate(const uint8_t *buffer, int64_t length) = 0;
};

}  // namespace flatbuffers

#endif  // FLATBUFFERS_BFBS_GENERATOR_H_
