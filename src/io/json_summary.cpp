#include "io/json_summary.hpp"
