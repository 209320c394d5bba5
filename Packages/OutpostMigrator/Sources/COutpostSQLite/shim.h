#include <sqlite3.h>

// sqlite3_config is variadic, which Swift cannot call; these wrap the one setting Outpost makes.

/// Turns SQLite's memory statistics off for the whole process. Only possible before SQLite is
/// initialized (before the first connection opens); returns SQLITE_MISUSE after that.
static inline int outpost_sqlite3_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
