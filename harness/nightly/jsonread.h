/* jsonread.h: a small JSON reader (RFC 8259) for the files PEAT writes and compares:
 * signature.json, ci.json. Values form a tree owned by the root. */
#ifndef PEAT_JSONREAD_H
#define PEAT_JSONREAD_H

#include "peat/peat.h"

typedef enum peat_json_kind {
    PEAT_JSON_NULL = 0,
    PEAT_JSON_BOOL,
    PEAT_JSON_NUMBER,
    PEAT_JSON_STRING,
    PEAT_JSON_ARRAY,
    PEAT_JSON_OBJECT
} peat_json_kind;

typedef struct peat_json {
    peat_json_kind kind;
    double num;              /* NUMBER, BOOL (0/1) */
    char *str;               /* STRING value; for members of an OBJECT: see keys */
    int n;                   /* ARRAY / OBJECT: number of items */
    char **keys;             /* OBJECT: n keys */
    struct peat_json *items; /* ARRAY / OBJECT: n values */
} peat_json;

/* Parses text into *out (free with peat_nightly_json_free). A syntax error is PEAT_ERR_FORMAT
 * naming the line and what was expected; `what` names the source in that message (a path). */
peat_status peat_nightly_json_parse(const char *text, const char *what, peat_json *out);
/* Reads and parses a file. */
peat_status peat_nightly_json_load(const char *path, peat_json *out);
void peat_nightly_json_free(peat_json *v);

/* The member `key` of an object (NULL if v is not an object or has no such key). */
const peat_json *peat_nightly_json_get(const peat_json *v, const char *key);
/* A dotted path of object members, e.g. "candidate.eff_bits" (NULL if any step is missing). */
const peat_json *peat_nightly_json_path(const peat_json *v, const char *path);
/* The number at path, or NaN when missing, null or not a number. */
double peat_nightly_json_num(const peat_json *v, const char *path);
/* The string at path, or fallback when missing or not a string. */
const char *peat_nightly_json_str(const peat_json *v, const char *path, const char *fallback);

#endif
