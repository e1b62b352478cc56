/* l2cap_ceiling: what an LE credit-based L2CAP channel carries between two local controllers
 * with nothing but the kernel in the path (no bluetoothd, no D-Bus), for scripts/bench-ceiling.
 *   l2cap_ceiling listen LOCAL PSM BYTES [MTU]
 *       accepts one channel, reads SDUs until BYTES arrived, prints one JSON line: bytes, SDUs,
 *       seconds and bytes per second from the first SDU to the last
 *   l2cap_ceiling send LOCAL REMOTE PSM BYTES CHUNK [MTU]
 *       connects (the kernel makes the LE link), writes BYTES in CHUNK-byte SDUs, waits for the
 *       listener to close, prints one JSON line (its own span: first write to the close)
 * LOCAL and REMOTE are LE public addresses (AA:BB:CC:DD:EE:FF). MTU sets both the channel's
 * receive and send MTU (default: the kernel's, 672). The socket API is the kernel's (AF_BLUETOOTH,
 * BTPROTO_L2CAP, SOCK_SEQPACKET); its few constants are written out here so that no Bluetooth
 * headers are needed to build it. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BT_AF 31           /* AF_BLUETOOTH */
#define BT_L2CAP 0         /* BTPROTO_L2CAP */
#define BT_SOL 274         /* SOL_BLUETOOTH */
#define BT_OPT_SNDMTU 12   /* BT_SNDMTU */
#define BT_OPT_RCVMTU 13   /* BT_RCVMTU */
#define BT_LE_PUBLIC 0x01  /* BDADDR_LE_PUBLIC */

struct l2_address {
  sa_family_t family;
  uint16_t psm;
  uint8_t bdaddr[6]; /* little endian: the last octet of the text first */
  uint16_t cid;
  uint8_t bdaddr_type;
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct l2_address address(const char *text, unsigned psm) {
  struct l2_address a;
  memset(&a, 0, sizeof a);
  a.family = BT_AF;
  a.psm = (uint16_t)psm; /* little endian on the wire; x86 is */
  a.bdaddr_type = BT_LE_PUBLIC;
  unsigned o[6];
  if (sscanf(text, "%x:%x:%x:%x:%x:%x", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5]) != 6) {
    fprintf(stderr, "l2cap_ceiling: bad address %s\n", text);
    exit(2);
  }
  for (int i = 0; i < 6; i++) a.bdaddr[i] = (uint8_t)o[5 - i];
  return a;
}

static int channel_socket(const char *local, unsigned psm, int mtu) {
  int fd = socket(BT_AF, SOCK_SEQPACKET, BT_L2CAP);
  if (fd < 0) {
    perror("l2cap_ceiling: socket");
    exit(1);
  }
  struct l2_address a = address(local, psm);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    perror("l2cap_ceiling: bind");
    exit(1);
  }
  if (mtu > 0) {
    uint16_t value = (uint16_t)mtu;
    setsockopt(fd, BT_SOL, BT_OPT_RCVMTU, &value, sizeof value);
    setsockopt(fd, BT_SOL, BT_OPT_SNDMTU, &value, sizeof value);
  }
  return fd;
}

static int listen_mode(const char *local, unsigned psm, long bytes, int mtu) {
  int server = channel_socket(local, psm, mtu);
  if (listen(server, 1) != 0) {
    perror("l2cap_ceiling: listen");
    return 1;
  }
  fprintf(stderr, "l2cap_ceiling: listening on PSM %u\n", psm);
  int fd = accept(server, NULL, NULL);
  if (fd < 0) {
    perror("l2cap_ceiling: accept");
    return 1;
  }
  static unsigned char buffer[65536];
  long got = 0, sdus = 0;
  double first = 0, last = 0;
  while (got < bytes) {
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0) {
      fprintf(stderr, "l2cap_ceiling: channel ended after %ld bytes (%s)\n", got,
              n < 0 ? strerror(errno) : "EOF");
      return 1;
    }
    last = now();
    if (sdus == 0) first = last;
    got += n;
    sdus++;
  }
  double seconds = last - first;
  printf("{\"bytes\":%ld,\"sdus\":%ld,\"seconds\":%.4f,\"bytesPerSecond\":%.0f}\n", got, sdus,
         seconds, seconds > 0 ? got / seconds : 0);
  close(fd);
  close(server);
  return 0;
}

static int send_mode(const char *local, const char *remote, unsigned psm, long bytes,
                     int chunk, int mtu) {
  int fd = channel_socket(local, 0, mtu);
  struct l2_address peer = address(remote, psm);
  if (connect(fd, (struct sockaddr *)&peer, sizeof peer) != 0) {
    perror("l2cap_ceiling: connect");
    return 1;
  }
  unsigned char *data = malloc((size_t)chunk);
  for (int i = 0; i < chunk; i++) data[i] = (unsigned char)(i * 7 + 13);
  double start = now();
  long sent = 0, sdus = 0;
  while (sent < bytes) {
    long n = bytes - sent < chunk ? bytes - sent : chunk;
    ssize_t w = write(fd, data, (size_t)n);
    if (w < 0) {
      perror("l2cap_ceiling: write");
      return 1;
    }
    sent += w;
    sdus++;
  }
  double written = now();
  char byte;
  (void)read(fd, &byte, 1); /* the listener closes once everything arrived */
  double closed = now();
  printf("{\"bytes\":%ld,\"sdus\":%ld,\"chunk\":%d,\"writeSeconds\":%.4f,\"seconds\":%.4f,"
         "\"bytesPerSecond\":%.0f}\n",
         sent, sdus, chunk, written - start, closed - start, sent / (closed - start));
  close(fd);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 5 && strcmp(argv[1], "listen") == 0)
    return listen_mode(argv[2], (unsigned)strtoul(argv[3], NULL, 0), atol(argv[4]),
                       argc > 5 ? atoi(argv[5]) : 0);
  if (argc >= 7 && strcmp(argv[1], "send") == 0)
    return send_mode(argv[2], argv[3], (unsigned)strtoul(argv[4], NULL, 0), atol(argv[5]),
                     atoi(argv[6]), argc > 7 ? atoi(argv[7]) : 0);
  fprintf(stderr,
          "usage: l2cap_ceiling listen LOCAL PSM BYTES [MTU]\n"
          "       l2cap_ceiling send LOCAL REMOTE PSM BYTES CHUNK [MTU]\n");
  return 2;
}
