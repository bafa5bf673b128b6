// Cross-fitted control-variate means (control_variate.hpp).
#include "analysis/control_variate.hpp"

#include <cmath>

namespace kestrel {

void ControlVariateSums::add(std::size_t index, const arma::vec& xs, const arma::vec& cs) {
  const std::size_t h = index % 2;
  if (x[h].is_empty()) {
    for (auto* v : {&x[h], &xx[h], &c[h], &cc[h], &xc[h]}) v->zeros(xs.n_elem);
  }
  n[h] += 1;
  x[h] += xs;
  xx[h] += arma::square(xs);
  c[h] += cs;
  cc[h] += arma::square(cs);
  xc[h] += xs % cs;
}

ControlVariateSums& ControlVariateSums::operator+=(const ControlVariateSums& o) {
  for (std::size_t h = 0; h < 2; ++h) {
    if (o.n[h] == 0) continue;
    if (n[h] == 0) {
      n[h] = o.n[h], x[h] = o.x[h], xx[h] = o.xx[h], c[h] = o.c[h], cc[h] = o.cc[h], xc[h] = o.xc[h];
      continue;
    }
    n[h] += o.n[h], x[h] += o.x[h], xx[h] += o.xx[h], c[h] += o.c[h], cc[h] += o.cc[h], xc[h] += o.xc[h];
  }
  return *this;
}

ControlVariateSums::Estimate ControlVariateSums::estimate() const {
  Estimate e;
  const double N = draws();
  const arma::uword rows = x[0].is_empty() ? x[1].n_elem : x[0].n_elem;
  arma::vec sx(rows, arma::fill::zeros), sxx(rows, arma::fill::zeros);
  for (std::size_t h = 0; h < 2; ++h)
    if (n[h] > 0) sx += x[h], sxx += xx[h];
  e.plain_mean = sx / N;
  const arma::vec plain_var = arma::clamp(sxx / N - arma::square(e.plain_mean), 0, arma::datum::inf) * (N / (N - 1));
  e.plain_se = arma::sqrt(plain_var / N);
  if (n[0] < kMinHalf || n[1] < kMinHalf) {
    e.mean = e.plain_mean, e.se = e.plain_se;
    e.reduction.ones(rows);
    return e;
  }
  // Per half: means, (n-1)-normalised variances and covariance.
  std::array<arma::vec, 2> mx, mc, vx, vc, cxc;
  for (std::size_t h = 0; h < 2; ++h) {
    const double k = n[h];
    mx[h] = x[h] / k;
    mc[h] = c[h] / k;
    vx[h] = (xx[h] - k * arma::square(mx[h])) / (k - 1);
    vc[h] = (cc[h] - k * arma::square(mc[h])) / (k - 1);
    cxc[h] = (xc[h] - k * mx[h] % mc[h]) / (k - 1);
  }
  e.mean.zeros(rows);
  arma::vec var(rows, arma::fill::zeros);
  for (std::size_t h = 0; h < 2; ++h) {
    const std::size_t o = 1 - h;  // the half the coefficient is fitted on
    arma::vec beta = cxc[o] / vc[o];
    beta.elem(arma::find_nonfinite(beta)).zeros();
    const double w = n[h] / N;
    e.mean += w * (mx[h] - beta % mc[h]);
    const arma::vec v = arma::clamp(vx[h] - 2 * beta % cxc[h] + arma::square(beta) % vc[h], 0, arma::datum::inf);
    var += w * w * v / n[h];
  }
  e.mean = arma::clamp(e.mean, 0, arma::datum::inf);
  e.se = arma::sqrt(var);
  // A row whose coefficient, fitted on few or wild draws, made its variance larger keeps the plain mean.
  const arma::uvec worse = arma::find(var > arma::square(e.plain_se));
  e.mean(worse) = e.plain_mean(worse);
  e.se(worse) = e.plain_se(worse);
  e.reduction = arma::square(e.plain_se) / arma::square(e.se);
  e.reduction.elem(arma::find_nonfinite(e.reduction)).ones();
  return e;
}

}  // namespace kestrel
