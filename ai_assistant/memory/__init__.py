"""Memory core: journal, importance, reflection, semantic tier, entities, working memory, nodes."""
