/*
 * Where aibox's own files are, for the build tree and for an install.
 *
 * In the build tree every executable sits in build/ and the data is the
 * source tree above it.  Installed, `aibox` is in PREFIX/bin, the tools in
 * PREFIX/libexec/aibox and the data in PREFIX/share/aibox.  Both are found
 * from /proc/self/exe, so nothing depends on the current directory.
 */
#ifndef AIBOX_PATHS_H
#define AIBOX_PATHS_H

/* The folder holding this executable, without a trailing '/'.  Never NULL. */
const char *exe_dir(void);

/* The folder holding the aibox-* tools (build/ or PREFIX/libexec/aibox). */
const char *libexec_dir(void);

/* The folder holding image/, the presets and other data (source tree or PREFIX/share/aibox). */
const char *data_dir(void);

/* Where allow's preset:NAME files are: data_dir()/share/presets, else data_dir()/presets. */
const char *presets_dir(void);

/* The price table (docs/budget.md): data_dir()/share/prices, else data_dir()/prices. */
const char *prices_file(void);

/* The user's prices, over the installed table's (docs/budget.md): aibox_home()/prices. */
const char *user_prices_file(void);

/* The folder for temporary files: $TMPDIR when set and not empty, else /tmp.  Never NULL. */
const char *temp_dir(void);

/* $AIBOX_HOME, or ~/.aibox.  Never NULL; "/.aibox" relative to "/" without HOME. */
const char *aibox_home(void);

/*
 * The dependency cache's folder (docs/cache.md), shared by every project:
 * $AIBOX_DEPS_CACHE, else $XDG_CACHE_HOME/aibox/deps, else ~/.cache/aibox/deps
 * (beside the images of docs/image.md).  Never NULL.
 */
const char *deps_cache_dir(void);

/* The user's cap on that folder's size (docs/cache.md): aibox_home()/cache-max. */
const char *deps_cache_max_file(void);

/*
 * The key of the store's secret scopes (docs/cache.md, "Scopes"):
 * aibox_home()/cache-scope-key, the user's, outside the store.
 */
const char *deps_scope_key_file(void);

#endif
