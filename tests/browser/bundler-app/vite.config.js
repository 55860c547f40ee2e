// Vite config of the bundler test app. 'maskattn' resolves to this repository's package entry
// point (as if installed); everything else is Vite's defaults, as a user would have them.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  logLevel: 'warn',
  resolve: {
    alias: [{ find: /^maskattn$/, replacement: fileURLToPath(new URL('../../../js/index.js', import.meta.url)) }],
  },
  build: {
    emptyOutDir: true,
  },
});
