// l2cap-order: does the kernel deliver LE credit-based channel SDUs in order when the
// receiver is slower than the link? Raw sockets only (no blekit, no bluetoothd in the channel),
// run by Tests/Lab/l2cap-order.sh inside the lab (issue 18, docs/l2cap.md).
//
//   l2cap-order server ADDR PSM COUNT SLEEP_EVERY SLEEP_MS
//       listens on ADDR (LE public) and PSM, reads COUNT SDUs, sleeping SLEEP_MS after every
//       SLEEP_EVERY of them, and checks each SDU's length (672), sequence number and filler;
//       exit 0 when all COUNT arrived in order and intact.
//   l2cap-order client LOCAL PEER PSM COUNT
//       connects from LOCAL to PEER's PSM and sends COUNT numbered 672-byte SDUs.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
// struct sockaddr_l2 as the kernel lays it out (bdaddr little-endian, LE public type 1).
struct l2addr { sa_family_t family; unsigned short psm; uint8_t bdaddr[6]; unsigned short cid; uint8_t type; } __attribute__((packed));
static void parse(const char *s, uint8_t out[6]) {
  unsigned b[6]; sscanf(s, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]);
  for (int i = 0; i < 6; i++) out[i] = (uint8_t)b[5 - i];
}
static struct l2addr mk(const char *a, int psm) {
  struct l2addr x; memset(&x, 0, sizeof x); x.family = 31; x.psm = (unsigned short)psm; parse(a, x.bdaddr); x.type = 1; return x;
}
int main(int argc, char **argv) {
  int fd = socket(31, SOCK_SEQPACKET, 0);
  if (fd < 0) { perror("socket"); return 1; }
  if (!strcmp(argv[1], "server")) {
    struct l2addr a = mk(argv[2], atoi(argv[3]));
    int count = atoi(argv[4]), every = atoi(argv[5]), ms = atoi(argv[6]);
    if (bind(fd, (void *)&a, sizeof a)) { perror("bind"); return 1; }
    if (listen(fd, 1)) { perror("listen"); return 1; }
    fprintf(stderr, "listening\n");
    int c = accept(fd, NULL, NULL);
    if (c < 0) { perror("accept"); return 1; }
    uint8_t buf[2048]; uint32_t expect = 0; int got = 0, misorder = 0, badlen = 0, corrupt = 0;
    long bytes = 0;
    for (;;) {
      ssize_t n = read(c, buf, sizeof buf);
      if (n <= 0) break;
      bytes += n; got++;
      if (n != 672) badlen++;
      uint32_t seq; memcpy(&seq, buf, 4);
      for (ssize_t i = 4; i < n; i++) if (buf[i] != (uint8_t)(seq + i)) { corrupt++; break; }
      if (seq != expect) { if (misorder < 20) printf("order: got %u expected %u (sdu #%d)\n", seq, expect, got); misorder++; }
      expect = seq + 1;
      if (every && got % every == 0) usleep(ms * 1000);
      if (got == count) break;
    }
    printf("server: %d SDUs, %ld bytes, %d out of order, %d bad length, %d corrupt\n", got, bytes, misorder, badlen, corrupt);
    return misorder || badlen || corrupt || got != count;
  } else {
    struct l2addr l = mk(argv[2], 0), p = mk(argv[3], atoi(argv[4]));
    int count = atoi(argv[5]);
    if (bind(fd, (void *)&l, sizeof l)) { perror("bind"); return 1; }
    if (connect(fd, (void *)&p, sizeof p)) { perror("connect"); return 1; }
    uint8_t buf[672];
    for (uint32_t s = 0; s < (uint32_t)count; s++) {
      memcpy(buf, &s, 4);
      for (int i = 4; i < 672; i++) buf[i] = (uint8_t)(s + i);
      if (write(fd, buf, sizeof buf) != sizeof buf) { perror("write"); return 1; }
    }
    fprintf(stderr, "client: wrote %d SDUs\n", count);
    sleep(5);
    close(fd);
    return 0;
  }
}
