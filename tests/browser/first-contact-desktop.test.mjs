// The first-contact tests (first-contact.mjs) at 1440x900, and the desktop-only ones; the
// phone's are in their own file, which the test runner runs beside this one.
globalThis.maskattnFirstContactSizes = ['desktop'];
await import('./first-contact.mjs');
