// Mask-building helpers (filled in by the mask-helpers work).
#pragma once
