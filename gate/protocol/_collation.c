/* Collation elements in C: the fast path of gate.protocol.collation (issue 41, defect 3).
 *
 * levels(text) takes NFD text and returns (primary, secondary, tertiary), each level's non-zero
 * weights as a str of chr(weight): exactly what `_elements` followed by `_level_text` gives in
 * Python, which is itself a port of pyuca's `collation_elements`. The Python loop costs about a
 * microsecond per contraction (`L` + U+00B7, a Thai prevowel and its consonant, U+0439 after NFD)
 * and per span where a mark may join a contraction: a 1 MB body of such keys cost 45 times ASCII.
 * Here the same loop walks the text once, with the table in flat arrays:
 *
 * - every code point below TABLE_SIZE: its combining class, whether it starts a contraction, and
 *   its own collation elements (an offset into one array of weight triples);
 * - code points from TABLE_SIZE up: their own elements in the same arrays, in slots after
 *   TABLE_SIZE for the one window [high_start, high_start + high_count) that holds every such entry
 *   (U+E0001..U+E01EF in DUCET); none starts a contraction or is a non-starter (checked when
 *   gate.protocol.collation configures the table). A high code point used to be looked up in a
 *   dict: an int made and hashed per character, which cost an unassigned plane-16 key four times
 *   a Cyrillic one (CI read 5.6x at load);
 * - contractions: the pyuca trie below each starting code point, as nested (value, children)
 *   tuples, walked only where a contraction may start;
 * - implicit weights: pyuca's rule, from the ranges configure() is given.
 *
 * The text is a singly linked list of code points, so that a mark pulled forward out of the
 * middle (pyuca's discontiguous rule) is unlinked in constant time: each step costs a bounded
 * amount of work, and a key costs time linear in its length.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define TABLE_SIZE 0x30000
#define START 1
#define HAS_ENTRY 2
#define MAX_SPECIAL 255  /* contraction starts, and code points that continue one: at most this many each */
#define END ((Py_ssize_t)-1)
#define MAX_RANGES 64

typedef struct {
    uint32_t start, end, base, by_offset;
} Range;

static uint8_t *classes;     /* combining class per code point below TABLE_SIZE */
static uint8_t *flags;       /* START, HAS_ENTRY */
static uint32_t *offsets;    /* slots + 1: element index of each slot's own entry (see slot_of) */
static uint16_t *weights;    /* three weights per element */
static uint32_t high_start, high_count;  /* the window of high code points with an entry */
static uint8_t *high_entry;  /* per code point of the window: 1 where it has an entry (maybe of 0 elements) */
#define MAX_HIGH_WINDOW 0x10000
static PyObject *contractions; /* dict: starting code point -> (value, children) */
static uint8_t *start_index;    /* 1 + index into start_nodes, or 0 */
static PyObject *start_nodes[MAX_SPECIAL];  /* borrowed from contractions */
static uint8_t *continue_index; /* 1 where some trie holds the code point below a start, or 0 */
/* Every edge of the tries (a node's children dict, a code point -> the child node) in one open-
 * addressed table, so a step down a contraction costs no Python call: the dict lookup it replaced
 * (an int key made elsewhere, so hashed and compared by value) was half the time of a key of
 * U+0CCB (a three-character contraction after NFD). The dicts stay alive in `contractions`. */
typedef struct {
    PyObject *parent;  /* a children dict; NULL: an empty slot */
    Py_UCS4 cp;
    PyObject *node;    /* borrowed */
} Edge;
static Edge *edges;
static size_t edge_mask;
static Range ranges[MAX_RANGES];
static int range_count;
/* 1 + the index of the first rule whose range holds a code point below TABLE_SIZE, or 0; and the
 * highest code point any rule holds. An unassigned code point used to be compared with every rule
 * (21 in DUCET), which made a key of U+0378 or U+10FFFD cost 2.5 times one of U+4E00. */
static uint8_t *range_of;
static uint32_t range_top;

/* The output. A key's output is its cost when one character expands to many elements (U+FDFA:
 * 18 per character, so a 1 MB body of it writes 6 million per level): most of that time was the
 * kernel handing out and zeroing fresh pages for buffers of UCS-4 that were then copied into the
 * strings (issue 52, defect 10). So each level is written once, at its final width:
 *
 * - primary: every non-zero primary weight is in [0x100, 0xFFFF] (gate.protocol.collation checks
 *   the table; implicit ones are at least 0xFB00), so a non-empty primary level is a UCS-2 str
 *   as CPython would make it: written straight into one (`PyUnicode_New`, resized as it grows);
 * - tertiary: every tertiary weight is below 0x80 (checked there too): an ASCII str, likewise;
 * - secondary: weights from 0x20 to 0x114, so its width is known only at the end: a UCS-2
 *   buffer, made into a str of the narrowest kind by `PyUnicode_FromKindAndData`.
 *
 * The capacity starts at the sum of the characters' own element counts (a close estimate). */
typedef struct {
    PyObject *primary;      /* str of kind UCS-2 and length `capacity` while writing */
    PyObject *tertiary;     /* str of kind ASCII and length `capacity` while writing */
    Py_UCS2 *secondary;
    Py_UCS2 *p;             /* the data of `primary` */
    Py_UCS1 *t;             /* the data of `tertiary` */
    Py_ssize_t size[3];
    Py_ssize_t capacity;
} Levels;

static int grow(Levels *out, Py_ssize_t more) {
    Py_ssize_t need = 0;
    for (int level = 0; level < 3; level++) {
        if (out->size[level] + more > need) {
            need = out->size[level] + more;
        }
    }
    if (need <= out->capacity) {
        return 0;
    }
    Py_ssize_t capacity = out->capacity * 2 > need ? out->capacity * 2 : need;
    if (out->primary == NULL) {
        out->primary = PyUnicode_New(capacity, 0xFFFF);
        out->tertiary = PyUnicode_New(capacity, 0x7F);
        if (out->primary == NULL || out->tertiary == NULL) {
            return -1;
        }
    } else if (PyUnicode_Resize(&out->primary, capacity) < 0 || PyUnicode_Resize(&out->tertiary, capacity) < 0) {
        return -1;
    }
    Py_UCS2 *secondary = PyMem_Realloc(out->secondary, (size_t)capacity * sizeof(Py_UCS2));
    if (secondary == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    out->secondary = secondary;
    out->p = PyUnicode_2BYTE_DATA(out->primary);
    out->t = PyUnicode_1BYTE_DATA(out->tertiary);
    out->capacity = capacity;
    return 0;
}

static inline void put(Levels *out, uint32_t primary, uint32_t secondary, uint32_t tertiary) {
    if (primary) out->p[out->size[0]++] = (Py_UCS2)primary;
    if (secondary) out->secondary[out->size[1]++] = (Py_UCS2)secondary;
    if (tertiary) out->t[out->size[2]++] = (Py_UCS1)tertiary;
}

static int first_rule(uint32_t cp) {
    if (cp < TABLE_SIZE) {
        return (int)range_of[cp] - 1;
    }
    for (int i = 0; cp <= range_top && i < range_count; i++) {
        if (ranges[i].start <= cp && cp <= ranges[i].end) {
            return i;
        }
    }
    return -1;
}

static int put_implicit(Levels *out, uint32_t cp) {
    uint32_t aaaa = 0xFBC0 + (cp >> 15), bbbb = (cp & 0x7FFF) | 0x8000;
    int i = first_rule(cp);
    if (i >= 0) {
        aaaa = ranges[i].by_offset ? ranges[i].base : ranges[i].base + (cp >> 15);
        bbbb = ranges[i].by_offset ? ((cp - ranges[i].start) | 0x8000) : ((cp & 0x7FFF) | 0x8000);
    }
    if (grow(out, 2) < 0) {
        return -1;
    }
    put(out, aaaa, 0x20, 0x02);
    put(out, bbbb, 0, 0);
    return 0;
}

/* A trie value: bytes of native uint16 weights, three per element. */
static int put_value(Levels *out, PyObject *value) {
    Py_ssize_t count = PyBytes_GET_SIZE(value) / (3 * (Py_ssize_t)sizeof(uint16_t));
    const uint16_t *element = (const uint16_t *)PyBytes_AS_STRING(value);
    if (grow(out, count) < 0) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++, element += 3) {
        put(out, element[0], element[1], element[2]);
    }
    return 0;
}

static inline unsigned class_of(Py_UCS4 cp) {
    return cp < TABLE_SIZE ? classes[cp] : 0;
}

/* The slot of a code point's own entry in `offsets`, or -1 where it has none. */
static inline int64_t slot_of(Py_UCS4 cp) {
    if (cp < TABLE_SIZE) {
        return (flags[cp] & HAS_ENTRY) ? (int64_t)cp : -1;
    }
    if (cp < high_start || cp - high_start >= high_count) {
        return -1;
    }
    return high_entry[cp - high_start] ? (int64_t)TABLE_SIZE + (int64_t)(cp - high_start) : -1;
}

/* A code point's own entry: 1 written, 0 none (the caller writes implicit weights), -1 error. */
static int put_own(Levels *out, Py_UCS4 cp) {
    int64_t slot = slot_of(cp);
    if (slot < 0) {
        return 0;
    }
    uint32_t first = offsets[slot], last = offsets[slot + 1];
    if (grow(out, last - first) < 0) {
        return -1;
    }
    for (uint32_t i = first; i < last; i++) {
        put(out, weights[3 * i], weights[3 * i + 1], weights[3 * i + 2]);
    }
    return 1;
}

static inline int has_own(Py_UCS4 cp) {
    return slot_of(cp) >= 0;
}

/* children.get(cp) for a trie node's children (a dict or None); borrowed, NULL when absent. Only
 * code points that continue some contraction can be there: the others are answered without a lookup. */
static inline size_t edge_slot(PyObject *parent, Py_UCS4 cp) {
    uint64_t h = ((uint64_t)(uintptr_t)parent >> 4) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)cp * 0xC2B2AE3D27D4EB4FULL;
    return (size_t)(h ^ (h >> 29)) & edge_mask;
}

static PyObject *child(PyObject *children, Py_UCS4 cp) {
    if (children == Py_None || cp >= TABLE_SIZE || !continue_index[cp]) {
        return NULL;
    }
    for (size_t i = edge_slot(children, cp);; i = (i + 1) & edge_mask) {
        if (edges[i].parent == NULL) {
            return NULL;
        }
        if (edges[i].parent == children && edges[i].cp == cp) {
            return edges[i].node;
        }
    }
}

/* Counts (table == NULL) or enters the edges below `node`, a (value, children) tuple, checking
 * its shape; -1 with an exception when it is not one. */
static int walk_edges(PyObject *node, Edge *table, Py_ssize_t *count, int depth) {
    if (!PyTuple_Check(node) || PyTuple_GET_SIZE(node) != 2
        || (PyTuple_GET_ITEM(node, 0) != Py_None && !PyBytes_Check(PyTuple_GET_ITEM(node, 0)))
        || (PyTuple_GET_ITEM(node, 1) != Py_None && !PyDict_Check(PyTuple_GET_ITEM(node, 1))) || depth > 32) {
        PyErr_SetString(PyExc_ValueError, "configure: a trie node is (value bytes or None, children dict or None)");
        return -1;
    }
    PyObject *children = PyTuple_GET_ITEM(node, 1), *key, *below;
    Py_ssize_t position = 0;
    while (children != Py_None && PyDict_Next(children, &position, &key, &below)) {
        unsigned long cp = PyLong_AsUnsignedLong(key);
        if (PyErr_Occurred() || cp > 0x10FFFF) {
            PyErr_SetString(PyExc_ValueError, "configure: a trie's children are keyed by code points");
            return -1;
        }
        if (table != NULL) {
            size_t i = edge_slot(children, (Py_UCS4)cp);
            while (table[i].parent != NULL) {
                i = (i + 1) & edge_mask;
            }
            table[i] = (Edge){children, (Py_UCS4)cp, below};
        }
        ++*count;
        if (walk_edges(below, table, count, depth + 1) < 0) {
            return -1;
        }
    }
    return 0;
}

#define VALUE(node) PyTuple_GET_ITEM(node, 0)
#define CHILDREN(node) PyTuple_GET_ITEM(node, 1)

/* The trie node of a starting code point (borrowed), or NULL. */
static PyObject *start_node(Py_UCS4 cp) {
    return cp < TABLE_SIZE && start_index[cp] ? start_nodes[start_index[cp] - 1] : NULL;
}

/* The value of the exact trie entry `matched` + `extra` (borrowed; NULL: none); `matched` starts
 * a contraction and holds `length` >= 1 code points. */
static PyObject *entry(const Py_UCS4 *matched, int length, Py_UCS4 extra) {
    PyObject *node = start_node(matched[0]);
    for (int i = 1; node != NULL && i < length; i++) {
        node = child(CHILDREN(node), matched[i]);
    }
    if (node == NULL) {
        return NULL;
    }
    node = child(CHILDREN(node), extra);
    return node != NULL && VALUE(node) != Py_None ? VALUE(node) : NULL;
}

#define MAX_MATCH 8

static int collate(const Py_UCS4 *text, Py_ssize_t size, Py_ssize_t *next, Levels *out) {
    for (Py_ssize_t i = 0; i < size; i++) {
        next[i] = i + 1 < size ? i + 1 : END;
    }
    Py_ssize_t head = size ? 0 : END;
    while (head != END) {
        Py_ssize_t b = next[head], c = b == END ? END : next[b];
        Py_UCS4 cp = text[head];
        unsigned klass = class_of(cp);
        PyObject *node = start_node(cp);
        if (node == NULL && PyErr_Occurred()) {
            return -1;
        }
        if (node == NULL) {
            int own = put_own(out, cp);
            if (own < 0) {
                return -1;
            }
            if (own) {  /* its own entry and no contraction: nothing can join it */
                head = b;
                continue;
            }
            if (!klass || b == END || class_of(text[b]) == 0 || class_of(text[b]) == klass) {
                if (put_implicit(out, cp) < 0) {
                    return -1;
                }
                head = b;
                continue;
            }
        } else {
            PyObject *children = CHILDREN(node);
            PyObject *pair = b == END ? NULL : child(children, text[b]);
            if (pair == NULL && PyErr_Occurred()) {
                return -1;
            }
            unsigned next_class = b == END ? 0 : class_of(text[b]);
            if (b == END || (pair == NULL && (!next_class || c == END || class_of(text[c]) == 0
                                               || class_of(text[c]) == next_class))) {
                if (put_value(out, VALUE(node)) < 0) {  /* stays alone */
                    return -1;
                }
                head = b;
                continue;
            }
            if (pair != NULL && VALUE(pair) != Py_None && CHILDREN(pair) == Py_None
                && (c == END || class_of(text[c]) == 0)) {
                if (put_value(out, VALUE(pair)) < 0) {  /* a two-character contraction, then a starter */
                    return -1;
                }
                head = c;
                continue;
            }
        }
        /* The general step (pyuca's loop): the longest entry from head (none when head is a mark
         * without an entry: nothing else reaches here), then the non-starters that may join it
         * without being adjacent. */
        Py_UCS4 matched[MAX_MATCH];
        int length = 0;
        PyObject *value = NULL;  /* borrowed from the trie, or NULL */
        if (node != NULL) {
            PyObject *walk = node;
            Py_ssize_t index = head;
            for (int depth = 1; walk != NULL && depth <= MAX_MATCH; depth++) {
                if (VALUE(walk) != Py_None) {
                    length = depth;
                    value = VALUE(walk);
                }
                index = next[index];
                if (index == END || CHILDREN(walk) == Py_None) {
                    break;
                }
                walk = child(CHILDREN(walk), text[index]);
                if (walk == NULL && PyErr_Occurred()) {
                    return -1;
                }
            }
        }
        for (int i = 0; i < length; i++) {
            matched[i] = text[head];
            head = next[head];
        }
        unsigned last_class = 256;
        int pulled = 0;  /* a mark's own entry pulled forward and written */
        for (Py_ssize_t j = head, previous = END; j != END; previous = j, j = next[j]) {
            unsigned joined_class = class_of(text[j]);
            if (joined_class == 0 || joined_class == last_class) {
                break;
            }
            last_class = joined_class;
            PyObject *joined = NULL;
            if (length) {
                joined = entry(matched, length, text[j]);
                if (joined == NULL && PyErr_Occurred()) {
                    return -1;
                }
            } else if (!has_own(text[j])) {
                continue;
            }
            if (length && joined == NULL) {
                continue;
            }
            if (previous == END) {
                head = next[j];
            } else {
                next[previous] = next[j];
            }
            if (joined != NULL) {
                value = joined;
            } else if (put_own(out, text[j]) < 0) {
                return -1;
            } else {
                pulled = 1;
            }
            break;
        }
        if (pulled) {
            continue;
        }
        if (value != NULL) {
            if (put_value(out, value) < 0) {
                return -1;
            }
        } else {
            if (put_implicit(out, text[head]) < 0) {
                return -1;
            }
            head = next[head];
        }
    }
    return 0;
}

static PyObject *levels(PyObject *module, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "levels(text) takes a str");
        return NULL;
    }
    if (classes == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "levels: configure() was not called");
        return NULL;
    }
    Py_UCS4 *codepoints = PyUnicode_AsUCS4Copy(text);
    if (codepoints == NULL) {
        return NULL;
    }
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    Py_ssize_t *next = PyMem_Malloc((size_t)(size ? size : 1) * sizeof(Py_ssize_t));
    Levels out = {NULL, NULL, NULL, NULL, NULL, {0, 0, 0}, 0};
    PyObject *result = NULL;
    Py_ssize_t estimate = 16;
    for (Py_ssize_t i = 0; i < size; i++) {
        Py_UCS4 cp = codepoints[i];
        int64_t slot = slot_of(cp);
        estimate += slot >= 0 ? (Py_ssize_t)(offsets[slot + 1] - offsets[slot]) : 2;
    }
    if (next == NULL) {
        PyErr_NoMemory();
    } else if (grow(&out, estimate) == 0 && collate(codepoints, size, next, &out) == 0
               && PyUnicode_Resize(&out.primary, out.size[0]) == 0 && PyUnicode_Resize(&out.tertiary, out.size[2]) == 0) {
        PyObject *secondary = PyUnicode_FromKindAndData(PyUnicode_2BYTE_KIND, out.secondary, out.size[1]);
        if (secondary != NULL) {
            result = PyTuple_Pack(3, out.primary, secondary, out.tertiary);
            Py_DECREF(secondary);
        }
    }
    Py_XDECREF(out.primary);
    Py_XDECREF(out.tertiary);
    PyMem_Free(out.secondary);
    PyMem_Free(next);
    PyMem_Free(codepoints);
    return result;
}

/* canonical_order(marks) -> the same code points stably sorted by combining class (canonical
 * ordering of a run of non-starters): a counting sort, linear in the run's length. */
static PyObject *canonical_order(PyObject *module, PyObject *text) {
    if (!PyUnicode_Check(text) || classes == NULL) {
        PyErr_SetString(PyExc_TypeError, "canonical_order(marks) takes a str, after configure()");
        return NULL;
    }
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    Py_UCS4 *marks = PyUnicode_AsUCS4Copy(text);
    Py_UCS4 *sorted = PyMem_Malloc((size_t)(size ? size : 1) * sizeof(Py_UCS4));
    PyObject *result = NULL;
    if (marks != NULL && sorted != NULL) {
        Py_ssize_t first[257] = {0};
        for (Py_ssize_t i = 0; i < size; i++) {
            first[class_of(marks[i]) + 1]++;
        }
        for (int klass = 0; klass < 256; klass++) {
            first[klass + 1] += first[klass];
        }
        for (Py_ssize_t i = 0; i < size; i++) {
            sorted[first[class_of(marks[i])]++] = marks[i];
        }
        result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, sorted, size);
    } else if (marks != NULL) {
        PyErr_NoMemory();
    }
    PyMem_Free(marks);
    PyMem_Free(sorted);
    return result;
}

/* mark_runs(text, members, minimum) -> [(start, end), ...]: the maximal runs of at least `minimum`
 * code points that `members` (bytes, one per code point below TABLE_SIZE; none above) marks, in
 * order. gate.protocol.collation's NFD finds the long runs of marks with it: the regular expression
 * it replaces tested a character class of hundreds of ranges at every position (11 ms for 500,000
 * characters against 18 ms for CPython's NFD of them) and needed a search for astral characters
 * first (5 ms more). */
static PyObject *mark_runs(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyUnicode_Check(args[0]) || !PyBytes_Check(args[1]) || PyBytes_GET_SIZE(args[1]) != TABLE_SIZE
        || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "mark_runs(text: str, members: bytes of TABLE_SIZE, minimum: int)");
        return NULL;
    }
    Py_ssize_t minimum = PyLong_AsSsize_t(args[2]);
    if (minimum < 1) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "mark_runs: minimum is at least 1");
        }
        return NULL;
    }
    const uint8_t *members = (const uint8_t *)PyBytes_AS_STRING(args[1]);
    int kind = PyUnicode_KIND(args[0]);
    const void *data = PyUnicode_DATA(args[0]);
    Py_ssize_t size = PyUnicode_GET_LENGTH(args[0]), start = -1;
    PyObject *runs = PyList_New(0);
    for (Py_ssize_t i = 0; runs != NULL && i <= size; i++) {
        Py_UCS4 cp = i < size ? PyUnicode_READ(kind, data, i) : TABLE_SIZE;
        int member = cp < TABLE_SIZE && members[cp];
        if (member && start < 0) {
            start = i;
        } else if (!member && start >= 0) {
            if (i - start >= minimum) {
                PyObject *span = Py_BuildValue("(nn)", start, i);
                if (span == NULL || PyList_Append(runs, span) < 0) {
                    Py_CLEAR(runs);
                }
                Py_XDECREF(span);
            }
            start = -1;
        }
    }
    return runs;
}

/* configure(classes: bytes, continues: bytes, entries: dict, contractions: dict, ranges: list)
 * classes: combining class per code point below TABLE_SIZE; continues: 1 where a code point
 * continues a contraction (is a key of a trie node's children below a start);
 * entries: code point -> weight bytes, every code point's own entry; contractions: starting
 * code point -> (value, children) trie node; ranges: (start, end, base, by_offset) implicit rules in
 * pyuca's order. Called once, at import. */
static PyObject *configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyBytes_Check(args[0]) || !PyBytes_Check(args[1]) || !PyDict_Check(args[2])
        || !PyDict_Check(args[3]) || !PyList_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "configure(classes, continues, entries, contractions, ranges)");
        return NULL;
    }
    if (classes != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was called already");
        return NULL;
    }
    if (PyBytes_GET_SIZE(args[0]) != TABLE_SIZE || PyBytes_GET_SIZE(args[1]) != TABLE_SIZE
        || PyList_GET_SIZE(args[4]) > MAX_RANGES) {
        PyErr_SetString(PyExc_ValueError, "configure: table sizes do not match TABLE_SIZE");
        return NULL;
    }
    uint8_t *new_classes = PyMem_Malloc(TABLE_SIZE), *new_flags = PyMem_Calloc(TABLE_SIZE, 1);
    uint8_t *new_starts = PyMem_Calloc(TABLE_SIZE, 1), *new_continues = PyMem_Calloc(TABLE_SIZE, 1);
    uint8_t *new_ranges = PyMem_Calloc(TABLE_SIZE, 1);
    int start_count = 0;
    Edge *new_edges = NULL;
    uint32_t *new_offsets = NULL;
    uint8_t *new_high_entry = NULL;
    uint16_t *new_weights = NULL;
    if (!new_classes || !new_flags || !new_starts || !new_continues || !new_ranges) {
        goto fail;
    }
    memcpy(new_classes, PyBytes_AS_STRING(args[0]), TABLE_SIZE);
    const char *continues = PyBytes_AS_STRING(args[1]);
    /* The window of high code points with an entry, then each slot's element count
     * (offsets[slot + 1] = count), then their running sum. */
    PyObject *key, *value;
    Py_ssize_t position = 0;
    uint32_t low_high = 0x110000, top_high = 0;
    while (PyDict_Next(args[2], &position, &key, &value)) {
        unsigned long cp = PyLong_AsUnsignedLong(key);
        if (PyErr_Occurred() || cp > 0x10FFFF || !PyBytes_Check(value) || PyBytes_GET_SIZE(value) % 6) {
            PyErr_SetString(PyExc_TypeError, "configure: entries maps code points to weight bytes");
            goto fail;
        }
        if (cp >= TABLE_SIZE) {
            low_high = cp < low_high ? (uint32_t)cp : low_high;
            top_high = cp > top_high ? (uint32_t)cp : top_high;
        }
    }
    uint32_t new_high_count = top_high >= low_high ? top_high - low_high + 1 : 0;
    if (new_high_count > MAX_HIGH_WINDOW) {
        PyErr_SetString(PyExc_ValueError, "configure: the entries above TABLE_SIZE span more than one window");
        goto fail;
    }
    Py_ssize_t slots = TABLE_SIZE + (Py_ssize_t)new_high_count;
    new_offsets = PyMem_Calloc((size_t)slots + 1, sizeof(uint32_t));
    new_high_entry = PyMem_Calloc(new_high_count ? new_high_count : 1, 1);
    if (!new_offsets || !new_high_entry) {
        goto fail;
    }
    position = 0;
    while (PyDict_Next(args[2], &position, &key, &value)) {
        unsigned long cp = PyLong_AsUnsignedLong(key);
        Py_ssize_t slot = cp < TABLE_SIZE ? (Py_ssize_t)cp : TABLE_SIZE + (Py_ssize_t)(cp - low_high);
        new_offsets[slot + 1] = (uint32_t)(PyBytes_GET_SIZE(value) / 6);
        if (cp < TABLE_SIZE) {
            new_flags[cp] |= HAS_ENTRY;
        } else {
            new_high_entry[cp - low_high] = 1;
        }
    }
    for (Py_ssize_t slot = 0; slot < slots; slot++) {
        new_offsets[slot + 1] += new_offsets[slot];
    }
    for (Py_ssize_t cp = 0; cp < TABLE_SIZE; cp++) {
        new_continues[cp] = continues[cp] != 0;
    }
    position = 0;
    while (PyDict_Next(args[3], &position, &key, &value)) {
        unsigned long cp = PyLong_AsUnsignedLong(key);
        if (PyErr_Occurred() || cp >= TABLE_SIZE || start_count == MAX_SPECIAL || !PyTuple_Check(value)
            || PyTuple_GET_SIZE(value) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(value, 0))) {
            PyErr_SetString(PyExc_ValueError, "configure: contractions maps code points to (value, children)");
            goto fail;
        }
        start_nodes[start_count] = value;
        new_starts[cp] = (uint8_t)++start_count;
        new_flags[cp] |= START;
    }
    Py_ssize_t edge_count = 0;
    for (int i = 0; i < start_count; i++) {
        if (walk_edges(start_nodes[i], NULL, &edge_count, 0) < 0) {
            goto fail;
        }
    }
    size_t edge_slots = 16;
    while (edge_slots < 4 * (size_t)edge_count) {  /* at most a quarter full: short probes */
        edge_slots *= 2;
    }
    new_edges = PyMem_Calloc(edge_slots, sizeof(Edge));
    if (!new_edges) {
        goto fail;
    }
    edge_mask = edge_slots - 1;
    edge_count = 0;
    for (int i = 0; i < start_count; i++) {
        if (walk_edges(start_nodes[i], new_edges, &edge_count, 0) < 0) {
            goto fail;
        }
    }
    new_weights = PyMem_Malloc((size_t)(new_offsets[slots] ? new_offsets[slots] : 1) * 3 * sizeof(uint16_t));
    if (!new_weights) {
        goto fail;
    }
    position = 0;
    while (PyDict_Next(args[2], &position, &key, &value)) {
        unsigned long cp = PyLong_AsUnsignedLong(key);
        Py_ssize_t slot = cp < TABLE_SIZE ? (Py_ssize_t)cp : TABLE_SIZE + (Py_ssize_t)(cp - low_high);
        memcpy(new_weights + 3 * new_offsets[slot], PyBytes_AS_STRING(value), (size_t)PyBytes_GET_SIZE(value));
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(args[4]); i++) {
        PyObject *rule = PyList_GET_ITEM(args[4], i);
        if (!PyArg_ParseTuple(rule, "IIII", &ranges[i].start, &ranges[i].end, &ranges[i].base, &ranges[i].by_offset)) {
            goto fail;
        }
        /* The primaries put_implicit writes are in [0x100, 0xFFFF] (see Levels). */
        if (ranges[i].end < ranges[i].start || ranges[i].base < 0x100
            || ranges[i].base + (ranges[i].by_offset ? 0 : (0x10FFFF >> 15)) > 0xFFFF
            || (ranges[i].by_offset && ranges[i].end - ranges[i].start > 0x7FFF)) {
            PyErr_SetString(PyExc_ValueError, "configure: an implicit weight rule gives a primary outside [0x100, 0xFFFF]");
            goto fail;
        }
    }
    range_count = (int)PyList_GET_SIZE(args[4]);
    for (int i = 0; i < range_count; i++) {  /* the first rule that holds a code point wins, as in pyuca */
        range_top = ranges[i].end > range_top ? ranges[i].end : range_top;
        for (uint32_t cp = ranges[i].start; cp <= ranges[i].end && cp < TABLE_SIZE; cp++) {
            new_ranges[cp] = new_ranges[cp] ? new_ranges[cp] : (uint8_t)(i + 1);
        }
    }
    range_of = new_ranges;
    classes = new_classes;
    flags = new_flags;
    offsets = new_offsets;
    weights = new_weights;
    high_start = low_high;
    high_count = new_high_count;
    high_entry = new_high_entry;
    contractions = Py_NewRef(args[3]);
    start_index = new_starts;
    continue_index = new_continues;
    edges = new_edges;
    Py_RETURN_NONE;
fail:
    if (!PyErr_Occurred()) {
        PyErr_NoMemory();
    }
    PyMem_Free(new_classes);
    PyMem_Free(new_flags);
    PyMem_Free(new_offsets);
    PyMem_Free(new_weights);
    PyMem_Free(new_starts);
    PyMem_Free(new_continues);
    PyMem_Free(new_ranges);
    PyMem_Free(new_high_entry);
    PyMem_Free(new_edges);
    return NULL;
}

static PyMethodDef METHODS[] = {
    {"levels", (PyCFunction)levels, METH_O,
     "levels(nfd_text) -> (primary, secondary, tertiary): the collation weights of each level as text"},
    {"canonical_order", (PyCFunction)canonical_order, METH_O,
     "canonical_order(marks) -> the marks stably sorted by combining class"},
    {"mark_runs", (PyCFunction)(void (*)(void))mark_runs, METH_FASTCALL,
     "mark_runs(text, members, minimum) -> [(start, end)]: the runs of at least minimum members"},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(classes, starts, entries, contractions, ranges): the collation table, once"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "gate.protocol._collation",
    "Collation weights in C (see gate/protocol/collation.py).", -1, METHODS, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__collation(void) {
    return PyModule_Create(&MODULE);
}
