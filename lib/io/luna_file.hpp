// A LUNA map's HDF5 group (LUNA 3.2 eq. 11 parameters, estimators/luna/luna.hpp): written and read here, in io/, so
// that the estimator family includes nothing above it.
#pragma once
#include <string>

#include "estimators/luna/luna.hpp"

namespace kestrel {

class H5Writer;
// HDF5: group holds datasets W [P, d], b [P], bank_u [h], bank_v [h], coef [C, h], gate_w [d], gate_gamma [1]
// and attributes variant, target_alpha, P, C, h, d. The writer must be committed by the caller.
void save_luna(H5Writer& h5, const std::string& group, const LunaParams& p);
LunaParams load_luna(const std::string& file, const std::string& group);

}  // namespace kestrel
