// payreview: not part of tree-sitter (see vendor/README.md).
//
// A pre-order walk of the visible nodes below a node, in the order a `TSTreeCursor` visits
// them with `goto_first_child` and `goto_next_sibling`. A cursor climbs back up through the
// hidden nodes (Python's statement lists are chains of hidden repeat nodes) at every step to
// find the next sibling; this walk keeps one iterator per level instead, so each subtree is
// entered once. The stack is on the heap: nesting depth cannot overflow the thread's stack.

typedef bool (*TSPayreviewVisit)(void *payload, TSNode node);

// Calls `visit` for each visible node below `node` (not `node` itself), parents before
// children, and walks a visible node's children only when `visit` returns true for it. Without
// `tokens`, the grammar's tokens (identifiers, keywords, punctuation: about half the visible
// nodes of Python code) are passed over: a walker that looks only for nonterminals saves a
// call and a node per token. An ERROR leaf is not a token of the grammar, and is visited.
// Without `leaf_parents`, a visible node whose visible children are all leaves, with no error
// below it, is visited but not entered: what the node index asks of every node, answered here
// from the subtree at hand instead of by three calls back into tree-sitter per node.
// With `kinds`, `visit` is called only for the nodes whose kind (`ts_node_symbol`) `kinds`
// marks, or is past its `kind_count` entries (ERROR), and every other node is entered as if
// `visit` had returned true: the node index files a few kinds, and a call across the language
// boundary per node of the others cost more than the filing.
// The cursor's child iterator is inlined (as `flatten` asks): called, it costs a fifth more.
#if defined(__GNUC__)
__attribute__((flatten))
#endif
void ts_payreview_walk(TSNode node, TSPayreviewVisit visit, void *payload, bool tokens,
                       bool leaf_parents, const bool *kinds, uint32_t kind_count) {
  const TSTree *tree = node.tree;
  const Subtree *root = (const Subtree *)node.id;
  if (!tree || !root || ts_subtree_child_count(*root) == 0) return;
  Array(CursorChildIterator) stack = array_new();
  array_push(&stack, ((CursorChildIterator) {
    .tree = tree,
    .parent = *root,
    .position = {node.context[0], {node.context[1], node.context[2]}},
    .child_index = 0,
    .structural_child_index = 0,
    .descendant_index = 0,
    .alias_sequence = ts_language_alias_sequence(tree->language, root->ptr->production_id),
  }));
  while (stack.size > 0) {
    CursorChildIterator *level = array_back(&stack);
    const TSSymbol *aliases = level->alias_sequence;
    TreeCursorEntry entry;
    bool visible;
    if (!ts_tree_cursor_child_iterator_next(level, &entry, &visible)) {
      array_pop(&stack);
      continue;
    }
    const Subtree *child = entry.subtree;
    bool enter = true;
    if (visible) {
      TSSymbol alias = 0;
      if (!ts_subtree_extra(*child) && aliases) {
        alias = aliases[entry.structural_child_index];
      }
      if (!tokens && !alias && ts_subtree_child_count(*child) == 0 &&
          ts_subtree_symbol(*child) < tree->language->token_count) {
        continue;
      }
      TSSymbol kind = ts_language_public_symbol(
        tree->language, alias ? alias : ts_subtree_symbol(*child)
      );
      if (!kinds || kind >= kind_count || kinds[kind]) {
        enter = visit(payload, ts_node_new(tree, child, entry.position, alias));
      }
      // `ts_node_descendant_count` less the node itself, against `ts_node_child_count`, and
      // `ts_node_has_error`.
      if (enter && !leaf_parents &&
          ts_subtree_visible_descendant_count(*child) <= ts_subtree_visible_child_count(*child) &&
          ts_subtree_error_cost(*child) == 0) {
        enter = false;
      }
    }
    if (enter && ts_subtree_child_count(*child) > 0) {
      array_push(&stack, ((CursorChildIterator) {
        .tree = tree,
        .parent = *child,
        .position = entry.position,
        .child_index = 0,
        .structural_child_index = 0,
        .descendant_index = 0,
        .alias_sequence = ts_language_alias_sequence(tree->language, child->ptr->production_id),
      }));
    }
  }
  array_delete(&stack);
}
