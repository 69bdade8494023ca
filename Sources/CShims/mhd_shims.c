#include "mhd_shims.h"
