// The regime and image-pipeline options (see regime_options.hpp).
#include "frontend/regime_options.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "data/images.hpp"

namespace kestrel {

namespace {

using O = RegimeOptions;
using W = const std::string&;

// Re-throws a library error with the source of the value in front.
template <typename F>
auto named(W where, F&& f) {
  try {
    return f();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}", where, e.what()));
  }
}

Option<O> text(std::string name, std::string help, OptionSet<O> set, OptionShow<O> show, OptionTraits traits = {}) {
  return option<O>(std::move(name), std::move(help), OptionKind::Text, std::move(set), std::move(show), traits);
}

void add_image_options(OptionTable<O>& t) {
  t.push_back(text(
      "data-dir", "Data directory (default: $KESTREL_DATA_DIR or the repository's datasets/)",
      [](O& x, W where, W text) {
        std::error_code ec;
        require(std::filesystem::is_directory(text, ec), "{}: '{}' is not a directory", where, text);
        x.data_dir = text;
      },
      [](const O& x) { return x.data_dir; }));
  t.push_back(text(
      "preprocess",
      "Image pixels: raw ([0,1] times --pixel-scale), center (minus the mean image), standardize (per pixel), "
      "standardize-global (one mean and std over all pixels) or mnist-norm ((x - 0.1307) / 0.3081; other sets: "
      "their own full-resolution pixel mean and std)",
      [](O& x, W where, W text) { x.preprocess = named(where, [&] { return parse_preprocess(text); }); },
      [](const O& x) { return to_string(x.preprocess); }));
  t.push_back(text(
      "resize",
      "Image downscale to sqrt(d) x sqrt(d): area (box filter), bilinear (half-pixel centres, no antialiasing, as "
      "TF/torch default) or bilinear-aa (triangle filter widened by the scale, as TF antialias=True / PIL)",
      [](O& x, W where, W text) { x.resize = named(where, [&] { return parse_resize(text); }); },
      [](const O& x) { return to_string(x.resize); }));
  t.push_back(text(
      "pixel-scale", "Image pixels in [0, 1] (1) or [0, 255] (255) before raw / center preprocessing",
      [](O& x, W where, W text) {
        require(text == "1" || text == "255", "{}: expected 1 or 255, got '{}'", where, text);
        x.pixel_scale = text == "1" ? 1.0 : 255.0;
      },
      [](const O& x) { return fmt::format("{}", x.pixel_scale); }, {.integer_text = true}));
}

void add_other_regime_options(OptionTable<O>& t) {
  t.push_back(text(
      "spectrum", "aniso: geometric:<condition>, rank:<r> or list:<l1,...,ld>",
      [](O& x, W, W text) { x.spectrum = text; },  // checked against d where d is known
      [](const O& x) { return x.spectrum; }));
  t.push_back(count_option<O>("clusters", "clustered: clusters per side", &O::clusters, 1));
  t.push_back(option<O>(
      "cluster-radius", "clustered: distance of the centres from 0", OptionKind::Real,
      [](O& x, W where, W text) {
        const double r = parse_real(where, text);
        require(r >= 0, "{}: expected a number >= 0, got '{}'", where, text);
        x.cluster_radius = r;
      },
      [](const O& x) { return fmt::format("{}", x.cluster_radius); }));
  t.push_back(text(
      "x-file", "file regime: points for X (and Y without --y-file), one per row: CSV/text, .npy or FILE.h5:/dataset",
      [](O& x, W where, W text) {
        require(!text.empty(), "{}: expected a file name", where);
        x.x_file = text;
      },
      [](const O& x) { return x.x_file; }));
  t.push_back(text(
      "y-file", "file regime: points for Y (same formats as --x-file)",
      [](O& x, W where, W text) {
        require(!text.empty(), "{}: expected a file name", where);
        x.y_file = text;
      },
      [](const O& x) { return x.y_file; }));
}

}  // namespace

const OptionTable<RegimeOptions>& image_option_table() {
  static const OptionTable<O> t = [] {
    OptionTable<O> t;
    add_image_options(t);
    return t;
  }();
  return t;
}

const OptionTable<RegimeOptions>& regime_option_table() {
  static const OptionTable<O> t = [] {
    OptionTable<O> t;
    add_image_options(t);
    add_other_regime_options(t);
    return t;
  }();
  return t;
}

std::string regime_help() {
  std::string s;
  for (const auto& n : regime_names()) s += (s.empty() ? "" : ", ") + n;
  return "Sampling regime: " + s;
}

const OptionTable<RegimeSpec>& draw_regime_option_table() {
  static const OptionTable<RegimeSpec> t = [] {
    OptionTable<RegimeSpec> t;
    t.push_back(seed_option<RegimeSpec>("Seed of the draws", &RegimeSpec::seed));
    t.push_back(count_option<RegimeSpec>("pair-index", "Which set pair of the seed (stream (seed, Data, pair_index))",
                                         &RegimeSpec::pair_index));
    append_lifted(t, regime_option_table(), &RegimeSpec::options);
    return t;
  }();
  return t;
}

}  // namespace kestrel
