/* dir_tree.c: a folder removed with all it holds (dir_tree.h), depth first, links not followed. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "core/dir_tree.h"

#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

int peat_dir_tree_remove(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) return 0;
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}
