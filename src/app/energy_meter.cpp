#include "app/energy_meter.hpp"
