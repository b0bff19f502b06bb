/* check.h: PEAT_ASSERT(cond, fmt, ...): a precondition of PEAT's own code (an index inside a
 * tensor, a stage run after the stages it needs). Active where NDEBUG is not defined (Debug and
 * the sanitizer builds): a broken one prints "peat: assertion failed: <cond> at file:line:
 * <message>" on stderr and aborts. Release builds (NDEBUG) compile it out. Input errors are not
 * preconditions: they take the PEAT_ERROR path (core/status.c). */
#ifndef PEAT_CORE_CHECK_H
#define PEAT_CORE_CHECK_H

void peat_assert_fail(const char *cond, const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((noreturn, format(printf, 4, 5)))
#endif
    ;

#ifdef NDEBUG
#define PEAT_ASSERT(cond, ...) ((void)0)
#else
#define PEAT_ASSERT(cond, ...)                                                                     \
    ((cond) ? (void)0 : peat_assert_fail(#cond, __FILE__, __LINE__, __VA_ARGS__))
#endif

#endif
