// `minilst validate [TABLE.yaml] [--format json] [--table ID]`: every published GPU figure of the
// validation table (predict/validation.hpp; default validation/published.yaml) predicted and set
// beside the published value, per table the mean and the largest error against the table's limit.
// Exit 0: every table within its limits; 1: a table beyond them; 2: the table cannot be read.
#pragma once

#include <string>

namespace minilst {

struct ValidateArgs {
  std::string path = "validation/published.yaml";
  std::string format = "text";  // text | json
  std::string table;            // --table ID: that table alone ("" : all)
};

int run_validate(const ValidateArgs& args);

}  // namespace minilst
