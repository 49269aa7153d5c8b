#include "app/run_rules.hpp"
