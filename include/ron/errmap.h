/*
 * The one shape of an error map's functions, shared by libronacct, libronledger and
 * libronaudit (not installed; each library's public header carries its own map).
 *
 * A map is an X-macro XX(suffix, value, name, message) with negative values. From it:
 *   RON_ERRMAP_CHECK(MAP, MIN, LAST)  every value is negative and MIN names the last one;
 *   RON_ERRMAP_DEFINE(MAP, OK, strerror_fn, name_fn)
 *       const char *strerror_fn(int) -> the message ("success" for OK, else "unknown error")
 *       const char *name_fn(int)     -> the name    ("OK" for OK, else "Unknown").
 */
#ifndef RON_ERRMAP_H
#define RON_ERRMAP_H

#define RON__ERRMAP_NEG(suffix, value, name, msg) _Static_assert(value < 0, "negative codes only");
#define RON__ERRMAP_MSG(suffix, value, name, msg)                                                  \
    case value:                                                                                    \
        return msg;
#define RON__ERRMAP_NAME(suffix, value, name, msg)                                                 \
    case value:                                                                                    \
        return name;

#define RON_ERRMAP_CHECK(MAP, MIN, LAST)                                                           \
    MAP(RON__ERRMAP_NEG)                                                                           \
    _Static_assert(MIN == LAST, #MIN " tracks the last code")

/* const char *fn(int code): CASE's text for a code of MAP, ok_text for OK, else other. */
#define RON__ERRMAP_LOOKUP(fn, MAP, CASE, OK, ok_text, other)                                      \
    const char *fn(int code) {                                                                     \
        switch (code) {                                                                            \
        case OK:                                                                                   \
            return ok_text;                                                                        \
            MAP(CASE)                                                                              \
        default:                                                                                   \
            return other;                                                                          \
        }                                                                                          \
    }

#define RON_ERRMAP_DEFINE(MAP, OK, strerror_fn, name_fn)                                           \
    RON__ERRMAP_LOOKUP(strerror_fn, MAP, RON__ERRMAP_MSG, OK, "success", "unknown error")          \
    RON__ERRMAP_LOOKUP(name_fn, MAP, RON__ERRMAP_NAME, OK, "OK", "Unknown")

#endif
