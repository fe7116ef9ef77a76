import { defineConfig } from 'vite';

// Preact through esbuild's automatic JSX runtime: no framework plugin is needed. The terminal
// (xterm.js) is imported lazily, so it lands in a chunk of its own that only a sandbox page
// loads; scripts/bundle-size.mjs checks the rest against the 250 kB gzipped budget.
export default defineConfig({
  root: '.',
  base: '/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    target: 'es2022',
  },
});
