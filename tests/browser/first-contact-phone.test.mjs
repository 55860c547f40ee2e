// The first-contact tests (first-contact.mjs) on a 390x844 phone; the
// desktop's are in their own file, which the test runner runs beside this one.
globalThis.maskattnFirstContactSizes = ['phone'];
await import('./first-contact.mjs');
