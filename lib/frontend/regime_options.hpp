// The regime and image-pipeline options, written once (issue #36 item 2) and offered by `kestrel variance`/`sweep`
// (and their TOML sections), `kestrel reproduce` and kestrel.reproduce (the image pipeline), and kestrel.draw_regime.
#pragma once
#include <string>

#include "data/regimes.hpp"
#include "frontend/option_table.hpp"

namespace kestrel {

// data-dir, preprocess, resize, pixel-scale: what every regime of images reads (and the UCI loaders' data-dir).
const OptionTable<RegimeOptions>& image_option_table();
// The image options and those of the other regimes: spectrum, clusters, cluster-radius, x-file, y-file.
const OptionTable<RegimeOptions>& regime_option_table();
// "Sampling regime: normal, sphere, ..." from the registry of regimes (data/regimes.hpp).
std::string regime_help();
// The options of kestrel.draw_regime after its name, d, L and sigma: seed, pair-index and the regime options.
const OptionTable<RegimeSpec>& draw_regime_option_table();

}  // namespace kestrel
