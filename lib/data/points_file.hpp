// Points from a researcher's own file for the `file` regime: a numeric text file (CSV or whitespace
// separated), a NumPy .npy array, or a 2-D HDF5 dataset written as FILE.h5:/path/to/dataset. One point
// per row (n x d on disk, d x n in memory as everywhere in kestrel); the sha256 of the file goes into the
// provenance of every result computed from it. A .npy array of 3 or 4 axes ([heads, L, d], [layers, heads, L, d]), or
// an HDF5 dataset with those axes named (dimension labels), is read where the caller asks for stacks (kestrel advise's
// attention heads).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <armadillo>

namespace kestrel {

struct PointsFile {
  std::string spec;    // as given: path, or path.h5:/dataset
  std::string path;    // the file on disk
  std::string sha256;  // of the whole file
  arma::mat points;    // d x n, every value finite
  // Leading axes of a stacked array ([heads] or [layers, heads]; empty for 2-D): points is then d x (their product *
  // L), stack s (C order over the leading axes) in columns [s * L, (s + 1) * L).
  std::vector<std::size_t> lead;
};

// Loads (once per process and file version: cached by spec, size and modification time). A file that
// cannot be opened, an unknown layout, a non-numeric or non-finite value or fewer than 2 points throw
// InputFileError naming the file (and line, index or dataset). An array with 3 or 4 axes is refused unless stacks is
// true.
std::shared_ptr<const PointsFile> load_points(const std::string& spec, bool stacks = false);

// A file with fewer points (rows) than coordinates (columns) is read as such, one point per row, but may be the
// transpose of what was meant: a one-line note saying how it was read, for the caller to show; "" otherwise.
std::string layout_note(const PointsFile& f);

}  // namespace kestrel
