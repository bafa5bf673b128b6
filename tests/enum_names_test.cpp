// The enum-name tables (core/enum_names.hpp): every enum that is written or read by name has each value named once,
// names unique, parse and name_of inverse to each other, and one error style naming the choices.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "analysis/variance_study.hpp"
#include "core/enum_names.hpp"
#include "data/images.hpp"
#include "data/regimes.hpp"
#include "data/uci.hpp"
#include "estimators/discrete/discrete.hpp"
#include "estimators/hrf/hybrid.hpp"
#include "estimators/luna/luna.hpp"
#include "estimators/registry.hpp"
#include "frontend/option_table.hpp"
#include "frontend/study_options.hpp"
#include "sampling/omega.hpp"
#include "tasks/advise/advise.hpp"

namespace kestrel {
namespace {

// Every value of E in [0, count) is named once, the names are unique, and parse_enum inverts name_of.
template <class E>
void check_table(int count) {
  SCOPED_TRACE(std::string(EnumNames<E>::what));
  std::set<std::string> names;
  std::set<int> values;
  for (const auto& n : EnumNames<E>::names) {
    EXPECT_TRUE(names.insert(std::string(n.name)).second) << n.name << " twice";
    EXPECT_TRUE(values.insert(static_cast<int>(n.value)).second) << n.name << ": its value twice";
    EXPECT_EQ(name_of(n.value), n.name);
    EXPECT_EQ(parse_enum<E>(n.name), n.value);
  }
  EXPECT_EQ(static_cast<int>(values.size()), count);
  for (int v = 0; v < count; ++v) EXPECT_TRUE(values.count(v)) << "value " << v << " has no name";
  EXPECT_FALSE(find_enum<E>("no-such-name").has_value());
  try {
    parse_enum<E>("no-such-name");
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown " + std::string(EnumNames<E>::what) + " 'no-such-name' (expected " + enum_choices<E>() + ")");
  }
}

TEST(EnumNames, EveryTableNamesEachValueOnceAndParsesBack) {
  check_table<Sampler>(5);
  check_table<Preprocess>(5);
  check_table<Resize>(3);
  check_table<Encoding>(2);
  check_table<Kind>(3);
  check_table<LunaVariant>(4);
  check_table<Quantity>(3);
  check_table<Status>(4);
  check_table<AdviseQuantity>(2);
  check_table<AdviseMetric>(5);
  check_table<LambdaKind>(2);
  check_table<DiscreteKind>(2);
  check_table<OptionKind>(4);
  check_table<StudyCommand>(2);
}

TEST(EnumNames, ChoicesReadAsAList) {
  EXPECT_EQ(enum_choices<Resize>(), "area, bilinear or bilinear-aa");
  EXPECT_EQ(enum_choices<Encoding>(), "onehot or ordinal");
  EXPECT_EQ(enum_choices<Sampler>(), "iid, orthogonal, simplex, structured or halton");
  // A results file's unknown status is an input error naming the choices.
  EXPECT_THROW(parse_status("fine"), IoError);
  EXPECT_EQ(metric_names(), (std::vector<std::string>{"rmse", "mean-abs", "row-relative", "centred", "tv"}));
}

}  // namespace
}  // namespace kestrel
