// The C surface blekit uses: libdbus-1, plus a few helpers for what Swift cannot call directly.
#ifndef BLEKIT_CDBUS_SHIM_H
#define BLEKIT_CDBUS_SHIM_H
#include <dbus/dbus.h>
#include <stdint.h>

/// DBUS_TIMEOUT_INFINITE is a cast macro, which Swift does not import.
static inline int blekit_timeout_infinite(void) { return DBUS_TIMEOUT_INFINITE; }

/// Reads a basic value of at most 8 bytes (every fixed type) as raw bits.
static inline uint64_t blekit_iter_get_fixed_bits(DBusMessageIter *iter) {
  DBusBasicValue value;
  value.u64 = 0;
  dbus_message_iter_get_basic(iter, &value);
  return value.u64;
}

/// Reads a string-like basic value (s, o, g) as a borrowed C string.
static inline const char *blekit_iter_get_string(DBusMessageIter *iter) {
  const char *value = 0;
  dbus_message_iter_get_basic(iter, &value);
  return value;
}

/// Reads the elements of a fixed-type array without copying; returns the element count.
static inline int blekit_iter_get_fixed_array(DBusMessageIter *iter, const void **out) {
  int count = 0;
  dbus_message_iter_get_fixed_array(iter, out, &count);
  return count;
}

/// Appends a string-like basic value (s, o, g).
static inline dbus_bool_t blekit_iter_append_string(DBusMessageIter *iter, int type, const char *value) {
  return dbus_message_iter_append_basic(iter, type, &value);
}

/// Appends a fixed-type array (e.g. ay) from a buffer.
static inline dbus_bool_t blekit_iter_append_fixed_array(DBusMessageIter *iter, int type,
                                                          const void *values, int count) {
  return dbus_message_iter_append_fixed_array(iter, type, &values, count);
}
#endif
