// Mask-building helpers (filled in by the mask-helpers work).
#include "maskattn/masks.hpp"
