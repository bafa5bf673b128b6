// A LUNA map's HDF5 group: save_luna and load_luna (see luna_file.hpp).
#include "io/luna_file.hpp"

#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/hdf5_reader.hpp"
#include "io/hdf5.hpp"

namespace kestrel {

void save_luna(H5Writer& h5, const std::string& group, const LunaParams& p) {
  validate(p);
  h5.group(group);
  h5.write(group + "/W", p.W, {"projections w_p (LUNA eq. 11)", "P,d"});
  h5.write(group + "/b", p.b, {"projection offsets b_p", "P"});
  h5.write(group + "/bank_u", p.u, {"frequencies u_k of the sinusoidal bank", "h"});
  h5.write(group + "/bank_v", p.v, {"phases v_k of the sinusoidal bank", "h", "rad"});
  h5.write(group + "/coef", p.A, {"channel coefficients A_ck: psi_c(z) = sum_k A_ck sin(u_k z + v_k)", "C,h"});
  h5.write(group + "/gate_w", p.gate_w, {"envelope weights g_w: g(x) = exp(g_w^T x + g_gamma |x|^2)", "d"});
  h5.write(group + "/gate_gamma", std::vector<double>{p.gate_gamma},
           {"envelope coefficient g_gamma", "none (one value)"});
  h5.attr(group, "variant", to_string(p.variant));
  h5.attr(group, "target_alpha", p.target_alpha);
  h5.attr(group, "P", static_cast<std::int64_t>(p.P()));
  h5.attr(group, "C", static_cast<std::int64_t>(p.C()));
  h5.attr(group, "h", static_cast<std::int64_t>(p.h()));
  h5.attr(group, "d", static_cast<std::int64_t>(p.d()));
}

LunaParams load_luna(const std::string& file, const std::string& group) {
  const H5Reader r(file);
  LunaParams p;
  p.variant = parse_luna_variant(r.attr_string(group, "variant"));
  p.target_alpha = r.attr_double(group, "target_alpha");
  p.W = r.read_mat(group + "/W");
  p.b = r.read_vec(group + "/b");
  p.u = r.read_vec(group + "/bank_u");
  p.v = r.read_vec(group + "/bank_v");
  p.A = r.read_mat(group + "/coef");
  p.gate_w = r.read_vec(group + "/gate_w");
  const arma::vec gg = r.read_vec(group + "/gate_gamma");
  if (gg.n_elem != 1) throw IoError(fmt::format("'{}': {}/gate_gamma must hold one value", file, group));
  p.gate_gamma = gg(0);
  if (static_cast<arma::uword>(r.attr_int(group, "P")) != p.P() ||
      static_cast<arma::uword>(r.attr_int(group, "C")) != p.C())
    throw IoError(fmt::format("'{}': attributes P, C of {} disagree with the datasets", file, group));
  validate(p);
  return p;
}

}  // namespace kestrel
