/* floor: the C baseline for scripts/bench-dbus, plain libdbus with blocking loops.
 *   floor rtt <bus address> <seconds> [calls]   round trips per second; a forked child echoes
 *                                        "si"; with calls, exactly that many after the warm-up
 *                                        (scripts/bench-dbus --callgrind counts instructions)
 *   floor decode <file> <iterations>     demarshal the message in <file> and walk every value
 */
#include <dbus/dbus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static DBusConnection *connect_bus(const char *address) {
  DBusError err;
  dbus_error_init(&err);
  DBusConnection *c = dbus_connection_open_private(address, &err);
  if (!c || !dbus_bus_register(c, &err)) {
    fprintf(stderr, "connect: %s\n", err.message);
    exit(1);
  }
  return c;
}

static double cpu_seconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

/* Voluntary plus involuntary context switches of this process so far (every thread). */
static double switches(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_nvcsw + (double)u.ru_nivcsw;
}

static double server_mark;  /* the server's CPU time when the measured phase began */
static double server_switch_mark;  /* its context switches then */
static int server_quit;

static DBusHandlerResult echo(DBusConnection *c, DBusMessage *m, void *data) {
  (void)data;
  if (dbus_message_is_method_call(m, "org.blekit.Bench", "Mark")) {
    server_mark = cpu_seconds();
    server_switch_mark = switches();
    return DBUS_HANDLER_RESULT_HANDLED;
  }
  if (dbus_message_is_method_call(m, "org.blekit.Bench", "Quit")) {
    server_quit = 1;
    return DBUS_HANDLER_RESULT_HANDLED;
  }
  if (!dbus_message_is_method_call(m, "org.blekit.Bench", "Echo"))
    return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
  const char *s = NULL;
  dbus_int32_t i = 0;
  DBusMessage *r;
  if (dbus_message_get_args(m, NULL, DBUS_TYPE_STRING, &s, DBUS_TYPE_INT32, &i, DBUS_TYPE_INVALID)) {
    r = dbus_message_new_method_return(m);
    dbus_message_append_args(r, DBUS_TYPE_STRING, &s, DBUS_TYPE_INT32, &i, DBUS_TYPE_INVALID);
  } else {
    r = dbus_message_new_error(m, DBUS_ERROR_INVALID_ARGS, "bad args");
  }
  dbus_connection_send(c, r, NULL);
  dbus_message_unref(r);
  return DBUS_HANDLER_RESULT_HANDLED;
}

/* Sends a no-reply control call (Mark, Quit) to the echo server. */
static void control(DBusConnection *c, const char *name, const char *member) {
  DBusMessage *m = dbus_message_new_method_call(name, "/bench", "org.blekit.Bench", member);
  dbus_message_set_no_reply(m, TRUE);
  dbus_connection_send(c, m, NULL);
  dbus_connection_flush(c);
  dbus_message_unref(m);
}

static int rtt(const char *address, double seconds, long fixed_calls) {
  int fds[2], back[2];
  if (pipe(fds) != 0 || pipe(back) != 0) return 1;
  pid_t child = fork();
  if (child == 0) {
    DBusConnection *c = connect_bus(address);
    dbus_connection_add_filter(c, echo, NULL, NULL);
    const char *name = dbus_bus_get_unique_name(c);
    if (write(fds[1], name, strlen(name) + 1) < 0) _exit(1);
    while (!server_quit && dbus_connection_read_write_dispatch(c, -1)) {}
    double used[2] = {cpu_seconds() - server_mark, switches() - server_switch_mark};
    if (write(back[1], used, sizeof used) < 0) _exit(1);
    _exit(0);
  }
  char name[256] = {0};
  size_t got = 0;
  while (got < sizeof name - 1) {
    ssize_t n = read(fds[0], name + got, 1);
    if (n <= 0 || name[got] == 0) break;
    got++;
  }
  DBusConnection *c = connect_bus(address);
  DBusError err;
  dbus_error_init(&err);
  long calls = 0;
  double start = 0, cpu_start = 0, switch_start = 0;
  for (int phase = 0; phase < 2; phase++) {
    if (phase == 1) control(c, name, "Mark");
    double begin = now();
    if (phase == 1) {
      start = begin;
      cpu_start = cpu_seconds();
      switch_start = switches();
    }
    long n = 0;
    for (;;) {
      if (phase == 0 && n == 500) break;
      if (phase == 1 && fixed_calls > 0 && n == fixed_calls) break;
      if (phase == 1 && fixed_calls == 0 && n % 100 == 0 && now() - begin >= seconds) break;
      DBusMessage *m = dbus_message_new_method_call(name, "/bench", "org.blekit.Bench", "Echo");
      const char *s = "hello";
      dbus_int32_t i = (dbus_int32_t)n;
      dbus_message_append_args(m, DBUS_TYPE_STRING, &s, DBUS_TYPE_INT32, &i, DBUS_TYPE_INVALID);
      DBusMessage *r = dbus_connection_send_with_reply_and_block(c, m, -1, &err);
      dbus_message_unref(m);
      if (!r) {
        fprintf(stderr, "call: %s\n", err.message);
        kill(child, SIGKILL);
        return 1;
      }
      dbus_int32_t back = -1;
      const char *bs = NULL;
      if (!dbus_message_get_args(r, NULL, DBUS_TYPE_STRING, &bs, DBUS_TYPE_INT32, &back,
                                 DBUS_TYPE_INVALID) || back != i) {
        fprintf(stderr, "bad echo\n");
        return 1;
      }
      dbus_message_unref(r);
      n++;
    }
    if (phase == 1) calls = n;
  }
  double elapsed = now() - start;
  double client_cpu = cpu_seconds() - cpu_start;
  double client_switches = switches() - switch_start;
  control(c, name, "Quit");
  double server[2] = {0, 0};
  if (read(back[0], server, sizeof server) != sizeof server) server[0] = server[1] = 0;
  waitpid(child, NULL, 0);
  printf("calls_per_sec=%f calls=%ld cpu_us_per_call=%f switches_per_call=%f\n", calls / elapsed,
         calls, (client_cpu + server[0]) / calls * 1e6, (client_switches + server[1]) / calls);
  return 0;
}

/* Walks every value under iter, extracting it: fixed values read, strings' bytes touched
 * (strlen, as a copy would), byte arrays fetched with get_fixed_array. */
static unsigned long walk(DBusMessageIter *iter) {
  unsigned long sum = 0;
  int type;
  while ((type = dbus_message_iter_get_arg_type(iter)) != DBUS_TYPE_INVALID) {
    switch (type) {
    case DBUS_TYPE_STRING:
    case DBUS_TYPE_OBJECT_PATH:
    case DBUS_TYPE_SIGNATURE: {
      const char *s;
      dbus_message_iter_get_basic(iter, &s);
      sum += strlen(s);
      break;
    }
    case DBUS_TYPE_ARRAY:
      if (dbus_message_iter_get_element_type(iter) == DBUS_TYPE_BYTE) {
        DBusMessageIter sub;
        const unsigned char *bytes;
        int n;
        dbus_message_iter_recurse(iter, &sub);
        dbus_message_iter_get_fixed_array(&sub, &bytes, &n);
        for (int k = 0; k < n; k++) sum += bytes[k];
        break;
      }
      /* fall through */
    case DBUS_TYPE_STRUCT:
    case DBUS_TYPE_DICT_ENTRY:
    case DBUS_TYPE_VARIANT: {
      DBusMessageIter sub;
      dbus_message_iter_recurse(iter, &sub);
      sum += walk(&sub);
      break;
    }
    default: {
      DBusBasicValue v;
      v.u64 = 0;
      dbus_message_iter_get_basic(iter, &v);
      sum += (unsigned long)v.u64;
      break;
    }
    }
    dbus_message_iter_next(iter);
  }
  return sum;
}

static int decode(const char *file, int iterations) {
  FILE *f = fopen(file, "rb");
  if (!f) { perror(file); return 1; }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buffer = malloc(size);
  if (fread(buffer, 1, size, f) != (size_t)size) { fclose(f); return 1; }
  fclose(f);
  unsigned long check = 0;
  double start = 0;
  for (int phase = 0; phase < 2; phase++) {
    int n = phase == 0 ? 3 : iterations;
    if (phase == 1) start = cpu_now();
    for (int k = 0; k < n; k++) {
      DBusError err;
      dbus_error_init(&err);
      DBusMessage *m = dbus_message_demarshal(buffer, (int)size, &err);
      if (!m) { fprintf(stderr, "demarshal: %s\n", err.message); return 1; }
      DBusMessageIter iter;
      if (dbus_message_iter_init(m, &iter)) check += walk(&iter);
      dbus_message_unref(m);
    }
  }
  double elapsed = cpu_now() - start;
  printf("decode_us=%f bytes=%ld check=%lu\n", elapsed / iterations * 1e6, size, check);
  free(buffer);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: floor rtt <address> <seconds> [calls] | decode <file> <iterations>\n");
    return 2;
  }
  if (strcmp(argv[1], "rtt") == 0) return rtt(argv[2], atof(argv[3]), argc > 4 ? atol(argv[4]) : 0);
  if (strcmp(argv[1], "decode") == 0) return decode(argv[2], atoi(argv[3]));
  return 2;
}
