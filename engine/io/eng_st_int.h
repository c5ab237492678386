/* eng_st_int.h - what eng_st.c (reading) and eng_st_write.c (writing) share: a shape's
 * element count and its text in messages; not an interface of the engine's.
 */
#ifndef ENG_ST_INT_H
#define ENG_ST_INT_H

#include <stddef.h>
#include <stdint.h>

#define SHAPE_STR_LEN 96 /* "[a, b, c, d]" with four 19-digit numbers fits */

/* The element count of a shape of n dimensions, all >= 0, into *numel: 1 when it does not
 * fit 64 bits, unless a dimension is 0 (then the count is 0, whatever the others). */
int eng_st__shape_numel(const int64_t *shape, int n, uint64_t *numel);
/* "[a, b]" of a shape into buf */
void eng_st__shape_str(char *buf, size_t cap, int ndim, const int64_t *shape);

#endif
