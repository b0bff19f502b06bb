/* dir_tree.h: a folder removed with all it holds (internal, not the host API): what `peat ci`
 * does to an unfinished item's folder and `peat calls export` to its scratch campaign. */
#ifndef PEAT_CORE_DIR_TREE_H
#define PEAT_CORE_DIR_TREE_H

/* Removes path and everything under it, links not followed; 0 on success (or when path does not
 * exist), -1 when something could not be removed. */
int peat_dir_tree_remove(const char *path);

#endif
