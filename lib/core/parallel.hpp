// Deterministic parallel loops: work is cut into a fixed number of blocks that does not depend on
// the thread count; each block writes its own slot and slots are combined in index order.
#pragma once
#include <cmath>
#include <cstddef>
#include <vector>

#include <algorithm>

#include <tbb/parallel_for.h>
#include <armadillo>

#include "core/vecmath.hpp"

namespace kestrel {

// Calls fn(b) for b in [0, n_blocks) in parallel; fn must only touch block b's own output.
template <typename Fn>
void for_each_block(std::size_t n_blocks, Fn&& fn) {
  tbb::parallel_for(std::size_t{0}, n_blocks, [&](std::size_t b) { fn(b); });
}

// Maps every block to a partial result, then folds the partials in block order.
template <typename T, typename MapFn, typename FoldFn>
T map_fold_blocks(std::size_t n_blocks, MapFn&& map, FoldFn&& fold, T init) {
  std::vector<T> partial(n_blocks);
  for_each_block(n_blocks, [&](std::size_t b) { partial[b] = map(b); });
  for (auto& p : partial) fold(init, p);
  return init;
}

// All pairs of columns of X and Y in block x block tiles: map(Xb, Yb, i0, j0) returns a tile's partial
// result (i0, j0: offsets of the tile's first columns), folded in tile order. Peak memory O(block^2). Xb and Yb view
// X's and Y's memory.
template <typename T, typename MapFn, typename FoldFn>
T map_fold_pair_blocks(const arma::mat& X, const arma::mat& Y, arma::uword block, MapFn&& map, FoldFn&& fold, T init) {
  const arma::uword bx = (X.n_cols + block - 1) / block, by = (Y.n_cols + block - 1) / block;
  return map_fold_blocks<T>(
      bx * by,
      [&](std::size_t b) {
        const arma::uword i0 = (b / by) * block, j0 = (b % by) * block;
        const arma::uword i1 = std::min<arma::uword>(i0 + block, X.n_cols) - 1;
        const arma::uword j1 = std::min<arma::uword>(j0 + block, Y.n_cols) - 1;
        // The tiles are read-only views of the columns (Armadillo's auxiliary-memory constructor), not copies.
        const arma::mat Xb(const_cast<double*>(X.colptr(i0)), X.n_rows, i1 - i0 + 1, false, true);
        const arma::mat Yb(const_cast<double*>(Y.colptr(j0)), Y.n_rows, j1 - j0 + 1, false, true);
        return map(Xb, Yb, i0, j0);
      },
      fold, std::move(init));
}

// exp of every entry, in place, over fixed blocks of 2^14 entries in parallel with the vectorised exp of
// core/vecmath.hpp (an entry's result depends only on its value), so identical for any thread count.
inline arma::mat exp_parallel(arma::mat F) {
  constexpr std::size_t kBlock = std::size_t{1} << 14;
  const std::size_t n = F.n_elem;
  double* p = F.memptr();
  for_each_block((n + kBlock - 1) / kBlock,
                 [&](std::size_t b) { simd::exp(p + b * kBlock, std::min(n, (b + 1) * kBlock) - b * kBlock); });
  return F;
}

// kestrel parallelises with TBB over fixed blocks and calls BLAS inside them; OpenBLAS's own threads then compete
// with TBB's and spin (measured: 60% of an ADERF fit in sched_yield under load, the Monte Carlo simulator 2.2x
// slower). Makes OpenBLAS single-threaded unless OPENBLAS_NUM_THREADS is set; a no-op with another BLAS.
void single_threaded_blas();
// Tiles and feature blocks (0.5-2 MiB) are allocated and freed over and over from TBB threads; glibc's defaults hand
// such blocks back to the kernel (mmap above 128 KiB, heap trimming) and every reuse faults its pages back in, zeroed
// (measured: 18% of the pairwise variance, bench/). Keeps blocks below 32 MiB in the heap and trims it only past
// 512 MiB of free memory. The CLI and the benchmarks call it at start-up; the Python module leaves its host alone.
void keep_freed_memory();

// OpenBLAS's own thread count (benchmarks: DGEMM on all cores, the machine's limit); a no-op with another BLAS.
void set_blas_threads(int n);

}  // namespace kestrel
