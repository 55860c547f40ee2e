// The branching panel, under the KV cache panel: what generation does beyond one sequence.
//   Fork: a prompt appended once to a paged cache (pageSize 2), forked to two more sequences that
//     each go their own way; the page tables (cache.pages(b)) show which pages are shared and which
//     a sequence copied when it first wrote into a shared one, and byteLength what that saves.
//   Tree: a draft of 6 tokens in a tree after the prompt, verified in one cache.attend(q, { tree }):
//     each node sees the prompt, its ancestors and itself (the weights); then cache.keep() keeps the
//     chosen path, and the cache continues from it.
// Q, K and V come from the page's seeded token embeddings (embedding.js), as in the decode panel.
// This file wires the panel; branching-model.js runs the caches, branching-view.js draws.

import { Heatmap } from './heatmap.js';
import { NODES, TREE, leafPaths, runFork, treeState, keepPath } from './branching-model.js';
import { render } from './branching-view.js';

/**
 * els: { fork, verify, keep, path, status, error, pagesCanvas, pagesTooltip, pagesReadout, treeCanvas,
 *        treeTooltip, treeReadout, call, json }; getMa() -> the MaskAttn in use; expose(state) for tests.
 */
export function setupBranching(els, { getMa, expose }) {
  const paths = leafPaths(TREE);
  els.path.replaceChildren(...paths.map((p, n) => {
    const o = document.createElement('option');
    o.value = String(n);
    o.textContent = p.map((i) => NODES[i]).join(' → ');
    return o;
  }));
  const maps = {
    pages: new Heatmap(els.pagesCanvas, {
      tooltip: els.pagesTooltip, readout: els.pagesReadout, maxCell: 48,
      hint: 'Hover or tap a page for the positions it holds and who shares it.',
    }),
    tree: new Heatmap(els.treeCanvas, {
      tooltip: els.treeTooltip, readout: els.treeReadout, maxCell: 44,
      hint: 'Hover or tap a cell for the node, the position and its weight.',
    }),
  };
  let state = { fork: null, tree: null };
  const chosen = () => paths[Number(els.path.value) || 0];
  const verify = () => { state.tree = treeState(getMa(), true); };
  const keep = () => {
    if (!state.tree?.verified) verify();
    Object.assign(state.tree, keepPath(getMa(), chosen()));
  };

  function act(fn) {
    els.error.hidden = true;
    try {
      fn();
      expose(render(els, maps, state, paths, chosen()));
    } catch (e) {
      els.error.hidden = false;
      els.error.textContent = `${e.name}: ${e.message}`;
    }
  }

  els.fork.addEventListener('click', () => act(() => { state.fork = runFork(getMa()); }));
  els.verify.addEventListener('click', () => act(verify));
  els.keep.addEventListener('click', () => act(keep));
  els.path.addEventListener('change', () => act(() => { if (state.tree?.kept) keep(); }));
  return {
    reset() {
      state = { fork: null, tree: null };
      act(() => {
        state.fork = runFork(getMa(), false);
        state.tree = treeState(getMa(), false);
      });
    },
  };
}
