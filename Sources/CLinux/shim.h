// The Linux headers Glibc's Swift module leaves out: epoll(7) and eventfd(2), for the
// Reactor (through the DBus module's Syscalls.swift only).
#ifndef BLEKIT_CLINUX_SHIM_H
#define BLEKIT_CLINUX_SHIM_H
#include <sys/epoll.h>
#include <sys/eventfd.h>
#endif
