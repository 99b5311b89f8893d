// The whole public API of weft in one include: the top floor's umbrella, which includes every
// floor below it (docs/ARCHITECTURE.md).
#pragma once

#include "fabric/all.h"
