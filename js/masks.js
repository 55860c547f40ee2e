// Mask-building helpers (filled in by the mask-helpers work; see js/masks.d.ts).
export {};
