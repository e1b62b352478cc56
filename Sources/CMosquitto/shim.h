// The C surface blekit's MQTT module uses: libmosquitto (Debian libmosquitto-dev).
#ifndef BLEKIT_CMOSQUITTO_SHIM_H
#define BLEKIT_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#endif
