// The factor of the calibration Hessian that GPTQ runs on, and the dense
// Cholesky behind it.
//
// GPTQ is usually written with U, the upper Cholesky factor of H^-1 (U^T U =
// H^-1): quantize column p, then w_j -= (w_p - q_p) / U_pp * U_pj for j > p.
// Unrolled, the value column p has when it is quantized is
//   w~_p = w_p + (1 / M_pp) sum_{t<p} (w_t - q_t) M_pt,
// with w the original weights and M = U^-T, the lower triangular matrix with
// M^T M = H. (With V = U^-1: U^T U = H^-1 gives H = V V^T, and q = w - d U for
// the scaled errors d_p = (w~_p - q_p) / U_pp, so d = (w - q) V; the diagonal
// term gives the formula above, since U_pp = 1 / V_pp.) So GPTQ needs M, and no
// inverse at all: one Cholesky of the index-reversed H (J H J = R^T R, R upper
// gives H = (J R J)^T (J R J), and J R J is lower): n^3/6 multiply-adds instead
// of n^3/2 for Cholesky + inverse + Cholesky.
//
// The factorization is f64 (H = X^T X is often badly conditioned); M is handed
// to GPTQ in f32, the precision of its weight updates.
#pragma once

#include "ninfer/Status.h"

#include <cstdint>
#include <vector>

namespace ninfer {
namespace quant {

// In place: the upper triangle of a (n x n, row-major, symmetric, both
// triangles filled) becomes R with R^T R = a; the strict lower triangle is left
// as it was. Fails, naming the column, when a pivot is not positive (a is not
// positive definite). Blocked right-looking, trailing updates spread over threads.
Status choleskyUpper(double* a, int64_t n, int threads);

// M (f32, n x n row-major, lower triangular, zero above the diagonal) with
// M^T M = h, for symmetric positive definite h (f64, both triangles filled).
// h is the work buffer and holds garbage afterwards (one n^2 f64 buffer, not
// two: n = 14336 is 1.6 GB).
Status gptqFactor(std::vector<double>& h, int64_t n, int threads, std::vector<float>& m);

} // namespace quant
} // namespace ninfer
