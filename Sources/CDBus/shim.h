// The C surface blekit uses: libdbus-1, plus a few helpers for what Swift cannot call directly.
#ifndef BLEKIT_CDBUS_SHIM_H
#define BLEKIT_CDBUS_SHIM_H
#include <dbus/dbus.h>
#endif
