// `minilst validate [TABLE.yaml] [--format json] [--table ID] [--out FILE.json]`: every published
// GPU figure of the validation table (predict/validation.hpp) predicted and set beside the published
// value, per table the mean and the largest error against the table's limit. The default table:
// validation/published.yaml under the working directory, else beside the program (the source tree
// of a build, or an install's share/minilst). --out writes the JSON to a new file (never over one).
// Exit 0: every table within its limits; 1: a table beyond them; 2: the table cannot be read.
#pragma once

#include <string>

namespace minilst {

struct ValidateArgs {
  std::string path;              // "" : the default table (above)
  std::string format = "text";  // text | json
  std::string table;            // --table ID: that table alone ("" : all)
  std::string out;              // --out: the JSON also written here ("" : none)
};

int run_validate(const ValidateArgs& args);

}  // namespace minilst
