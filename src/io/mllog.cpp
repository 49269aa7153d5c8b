#include "io/mllog.hpp"
