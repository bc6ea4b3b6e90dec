#include "high.h"
#include "low.h"

int rt_layers_high(int n) { return rt_layers_low(n) + 1; }
