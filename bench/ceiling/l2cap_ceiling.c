/* l2cap_ceiling: what LE credit-based L2CAP channels carry between two controllers with nothing
 * but the kernel in the path (no bluetoothd, no D-Bus), for scripts/bench-ceiling.
 *   l2cap_ceiling listen LOCAL PSM BYTES [MTU] [--channels K] [--att] [--idle S]
 *       accepts K channels (default 1), reads SDUs from all of them until BYTES arrived in
 *       total, closes them and prints one JSON line: bytes, SDUs, seconds and bytes per second
 *       from the first SDU on any channel to the last on any channel, and the same per channel
 *       ("perChannel": its own first SDU to its own last, with "start" and "end", its first and
 *       last SDU in seconds after the first SDU of all)
 *   l2cap_ceiling send LOCAL REMOTE PSM BYTES CHUNK [MTU] [--channels K] [--att] [--settle S]
 *                      [--idle S]
 *       connects K channels to REMOTE's PSM, one after the other (the kernel makes the LE link
 *       with the first and carries the others over it), waits S seconds (default 0), then
 *       writes BYTES in CHUNK-byte SDUs, BYTES/K on each channel (the first BYTES%K channels
 *       one byte more), interleaved: one SDU to each channel that can take one, round after
 *       round. Then it waits for the listener to close every channel and prints one JSON line
 *       (its own span: first write to the last close)
 * --att (both sides): the first of the K channels is LE's fixed ATT channel (CID 4) instead of a
 * credit-based one, the path of a notification on the ATT bearer: it has no credits, only the
 * controller's ACL flow control, and the kernel drops what a full receive buffer cannot take. The
 * listener must then be the only one bound to CID 4 on its controller, and the sender's side
 * should have nothing bound there either: bluetoothd binds it on every controller, so stop
 * bluetoothd on both sides first. Each write on it is one frame, CHUNK bytes, as an ATT PDU
 * would be; the kernel does not look inside. The other K - 1 channels are credit-based on PSM.
 * Closing a fixed channel sends nothing, so when all arrived the listener sends one byte back on
 * it before it closes, which tells the sender to close its end. With the equal split the slowest
 * channel sets the aggregate: the ATT channel, bound by nothing but the controller, finishes its
 * third long before the credit-based ones. A scheduler that hands each SDU to whichever channel
 * can take it (bluetoothd's, for notifications) would carry at least what the ATT channel alone
 * carries (K = 1 with --att).
 * LOCAL and REMOTE are LE public addresses (AA:BB:CC:DD:EE:FF). MTU sets each channel's receive
 * and send MTU (0 or absent: the kernel's, 672). --idle S (default 30) bounds every wait: a
 * connect, an accept, and any stretch without progress; a wait that runs out prints one line
 * saying which and exits 1, as does a channel that fails. With K = 1 this is the single channel
 * of earlier versions. The socket API is the kernel's (AF_BLUETOOTH, BTPROTO_L2CAP,
 * SOCK_SEQPACKET); its few constants are written out here so that no Bluetooth headers are
 * needed to build it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define BT_AF 31           /* AF_BLUETOOTH */
#define BT_L2CAP 0         /* BTPROTO_L2CAP */
#define BT_SOL 274         /* SOL_BLUETOOTH */
#define BT_OPT_SNDMTU 12   /* BT_SNDMTU */
#define BT_OPT_RCVMTU 13   /* BT_RCVMTU */
#define BT_LE_PUBLIC 0x01  /* BDADDR_LE_PUBLIC */
#define ATT_CID 4          /* LE's fixed channel for ATT */
#define MAX_CHANNELS 16

struct l2_address {
  sa_family_t family;
  uint16_t psm;
  uint8_t bdaddr[6]; /* little endian: the last octet of the text first */
  uint16_t cid;
  uint8_t bdaddr_type;
};

/* One channel as either side sees it. */
struct channel {
  int fd;
  long share;        /* sender: bytes this channel is to carry */
  long bytes, sdus;  /* written or read so far */
  double first, last;
  int open;          /* listener: not yet at EOF; sender: not yet closed by the listener */
  int snd_mtu, rcv_mtu;
};

/* Options after the positional arguments. */
static int channel_count = 1;
static double settle_seconds = 0;
static double idle_seconds = 30;
static int att_first = 0;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct l2_address address(const char *text, unsigned psm, unsigned cid) {
  struct l2_address a;
  memset(&a, 0, sizeof a);
  a.family = BT_AF;
  a.psm = (uint16_t)psm; /* little endian on the wire; x86 is */
  a.cid = (uint16_t)cid;
  a.bdaddr_type = BT_LE_PUBLIC;
  unsigned o[6];
  if (sscanf(text, "%x:%x:%x:%x:%x:%x", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5]) != 6) {
    fprintf(stderr, "l2cap_ceiling: bad address %s\n", text);
    exit(2);
  }
  for (int i = 0; i < 6; i++) a.bdaddr[i] = (uint8_t)o[5 - i];
  return a;
}

/* A socket bound to LOCAL and PSM, or to the fixed channel CID when CID is not 0. */
static int channel_socket(const char *local, unsigned psm, unsigned cid, int mtu) {
  int fd = socket(BT_AF, SOCK_SEQPACKET, BT_L2CAP);
  if (fd < 0) {
    perror("l2cap_ceiling: socket");
    exit(1);
  }
  struct l2_address a = address(local, psm, cid);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    fprintf(stderr, "l2cap_ceiling: bind to %s %s %u: %s%s\n", local, cid ? "CID" : "PSM",
            cid ? cid : psm, strerror(errno), cid ? " (is bluetoothd still running?)" : "");
    exit(1);
  }
  if (mtu > 0) {
    uint16_t value = (uint16_t)mtu;
    setsockopt(fd, BT_SOL, BT_OPT_RCVMTU, &value, sizeof value);
    setsockopt(fd, BT_SOL, BT_OPT_SNDMTU, &value, sizeof value);
  }
  return fd;
}

/* The channel's negotiated MTUs, -1 where the kernel does not say. */
static void read_mtus(struct channel *c) {
  uint16_t value = 0;
  socklen_t size = sizeof value;
  c->snd_mtu = getsockopt(c->fd, BT_SOL, BT_OPT_SNDMTU, &value, &size) == 0 ? value : -1;
  size = sizeof value;
  c->rcv_mtu = getsockopt(c->fd, BT_SOL, BT_OPT_RCVMTU, &value, &size) == 0 ? value : -1;
}

static int idle_ms(void) { return (int)(idle_seconds * 1000); }

static void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static int listen_mode(const char *local, unsigned psm, long bytes, int mtu) {
  int server = channel_socket(local, psm, 0, mtu);
  if (listen(server, channel_count) != 0) {
    perror("l2cap_ceiling: listen");
    return 1;
  }
  int att_server = -1;
  if (att_first) {
    att_server = channel_socket(local, 0, ATT_CID, 0);
    if (listen(att_server, 1) != 0) {
      perror("l2cap_ceiling: listen on the ATT channel");
      return 1;
    }
  }
  fprintf(stderr, "l2cap_ceiling: listening on PSM %u for %d channel(s)%s\n", psm, channel_count,
          att_first ? ", the first on the ATT channel" : "");
  struct channel channels[MAX_CHANNELS];
  memset(channels, 0, sizeof channels);
  for (int i = 0; i < channel_count; i++) {
    /* The first channel waits for the sender's connect and its settle time too. */
    int from = att_first && i == 0 ? att_server : server;
    struct pollfd p = {.fd = from, .events = POLLIN};
    int limit = idle_ms() + (i == 0 ? 60000 : 0);
    int ready = poll(&p, 1, limit);
    if (ready <= 0) {
      fprintf(stderr, "l2cap_ceiling: accepted %d of %d channels, then none within %d s\n", i,
              channel_count, limit / 1000);
      return 1;
    }
    channels[i].fd = accept(from, NULL, NULL);
    if (channels[i].fd < 0) {
      fprintf(stderr, "l2cap_ceiling: accept of channel %d of %d: %s\n", i + 1, channel_count,
              strerror(errno));
      return 1;
    }
    channels[i].open = 1;
    read_mtus(&channels[i]);
    set_nonblocking(channels[i].fd);
    if (from == att_server) {
      /* Nothing holds the sender back on this channel: a receive queue as long as the kernel
       * allows (net.core.rmem_max) gives the reader the most slack. */
      int size = 1 << 22;
      setsockopt(channels[i].fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    }
  }
  static unsigned char buffer[65536];
  long got = 0, sdus = 0;
  double first = 0, last = 0;
  while (got < bytes) {
    struct pollfd p[MAX_CHANNELS];
    int open = 0;
    for (int i = 0; i < channel_count; i++) {
      p[i].fd = channels[i].open ? channels[i].fd : -1;
      p[i].events = POLLIN;
      p[i].revents = 0;
      open += channels[i].open;
    }
    if (open == 0) {
      fprintf(stderr, "l2cap_ceiling: every channel ended after %ld of %ld bytes\n", got, bytes);
      return 1;
    }
    int ready = poll(p, (nfds_t)channel_count, idle_ms());
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      fprintf(stderr, "l2cap_ceiling: no SDU for %.0f s after %ld of %ld bytes (per channel:",
              idle_seconds, got, bytes);
      for (int i = 0; i < channel_count; i++) fprintf(stderr, " %ld", channels[i].bytes);
      fprintf(stderr, ")\n");
      return 1;
    }
    for (int i = 0; i < channel_count; i++) {
      if (!p[i].revents) continue;
      struct channel *c = &channels[i];
      /* Read what is queued on this channel now, one SDU per read. */
      for (int reads = 0;; reads++) {
        ssize_t n = recv(c->fd, buffer, sizeof buffer, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
          /* A hang-up with nothing to read ends the channel; otherwise wait for more. */
          if (reads > 0 || !(p[i].revents & (POLLHUP | POLLERR))) break;
          n = 0;
        }
        if (n <= 0) {
          fprintf(stderr, "l2cap_ceiling: channel %d ended after %ld bytes (%s)\n", i + 1,
                  c->bytes, n < 0 ? strerror(errno) : "EOF");
          c->open = 0;
          break;
        }
        last = now();
        if (sdus == 0) first = last;
        if (c->sdus == 0) c->first = last;
        c->last = last;
        c->bytes += n;
        c->sdus++;
        got += n;
        sdus++;
      }
    }
  }
  double seconds = last - first;
  printf("{\"channels\":%d,\"att\":%s,\"bytes\":%ld,\"sdus\":%ld,\"seconds\":%.4f,"
         "\"bytesPerSecond\":%.0f,\"perChannel\":[",
         channel_count, att_first ? "true" : "false", got, sdus, seconds,
         seconds > 0 ? got / seconds : 0);
  for (int i = 0; i < channel_count; i++) {
    struct channel *c = &channels[i];
    double span = c->last - c->first;
    printf("%s{\"bytes\":%ld,\"sdus\":%ld,\"seconds\":%.4f,\"bytesPerSecond\":%.0f,"
           "\"start\":%.4f,\"end\":%.4f,\"rcvMtu\":%d,\"sndMtu\":%d}",
           i ? "," : "", c->bytes, c->sdus, span, span > 0 ? c->bytes / span : 0,
           c->sdus ? c->first - first : 0, c->sdus ? c->last - first : 0, c->rcv_mtu,
           c->snd_mtu);
  }
  printf("]}\n");
  fflush(stdout);
  /* The ATT channel is fixed: closing it sends nothing, and the sender would learn of the end only
   * when the link goes. Its closing after that met a kernel BUG on Debian 12's 6.1.0-57 (list
   * corruption in hci_chan_del from l2cap_sock_release; the sender died of it, twice in the run
   * of 2026-12-05 06:50). So the listener first sends one byte back on it: the sender closes as
   * soon as it reads that byte, while the link is still up. */
  if (att_first) (void)send(channels[0].fd, "", 1, MSG_DONTWAIT);
  for (int i = 0; i < channel_count; i++) close(channels[i].fd);
  close(server);
  if (att_server >= 0) close(att_server);
  return 0;
}

static int send_mode(const char *local, const char *remote, unsigned psm, long bytes,
                     int chunk, int mtu) {
  struct channel channels[MAX_CHANNELS];
  memset(channels, 0, sizeof channels);
  struct l2_address peer = address(remote, psm, 0);
  struct l2_address att_peer = address(remote, 0, ATT_CID);
  /* SO_SNDTIMEO bounds a blocking connect of an L2CAP socket. */
  struct timeval limit = {.tv_sec = (time_t)idle_seconds};
  for (int i = 0; i < channel_count; i++) {
    struct channel *c = &channels[i];
    int att = att_first && i == 0;
    c->fd = att ? channel_socket(local, 0, ATT_CID, 0) : channel_socket(local, 0, 0, mtu);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    struct l2_address *to = att ? &att_peer : &peer;
    if (connect(c->fd, (struct sockaddr *)to, sizeof *to) != 0) {
      fprintf(stderr, "l2cap_ceiling: connect of channel %d of %d: %s\n", i + 1, channel_count,
              strerror(errno));
      return 1;
    }
    read_mtus(c);
    if (c->snd_mtu > 0 && chunk > c->snd_mtu) {
      fprintf(stderr, "l2cap_ceiling: chunk %d exceeds channel %d's send MTU %d\n", chunk, i + 1,
              c->snd_mtu);
      return 1;
    }
    c->share = bytes / channel_count + (i < bytes % channel_count ? 1 : 0);
    c->open = 1;
    set_nonblocking(c->fd);
  }
  if (settle_seconds > 0) {
    struct timespec pause = {.tv_sec = (time_t)settle_seconds,
                             .tv_nsec = (long)((settle_seconds - (time_t)settle_seconds) * 1e9)};
    nanosleep(&pause, NULL);
  }
  unsigned char *data = malloc((size_t)chunk);
  for (int i = 0; i < chunk; i++) data[i] = (unsigned char)(i * 7 + 13);
  double start = now();
  long sent = 0, sdus = 0;
  while (sent < bytes) {
    struct pollfd p[MAX_CHANNELS];
    for (int i = 0; i < channel_count; i++) {
      p[i].fd = channels[i].bytes < channels[i].share ? channels[i].fd : -1;
      p[i].events = POLLOUT;
      p[i].revents = 0;
    }
    int ready = poll(p, (nfds_t)channel_count, idle_ms());
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      fprintf(stderr, "l2cap_ceiling: no channel could take an SDU for %.0f s after %ld of %ld "
              "bytes (per channel:", idle_seconds, sent, bytes);
      for (int i = 0; i < channel_count; i++) fprintf(stderr, " %ld", channels[i].bytes);
      fprintf(stderr, ")\n");
      return 1;
    }
    for (int i = 0; i < channel_count; i++) {
      struct channel *c = &channels[i];
      if (!p[i].revents) continue;
      if (p[i].revents & (POLLERR | POLLHUP | POLLNVAL)) {
        int error = 0;
        socklen_t size = sizeof error;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &error, &size);
        fprintf(stderr, "l2cap_ceiling: channel %d failed after %ld bytes (%s)\n", i + 1,
                c->bytes, error ? strerror(error) : "hung up");
        return 1;
      }
      long n = c->share - c->bytes < chunk ? c->share - c->bytes : chunk;
      ssize_t w = send(c->fd, data, (size_t)n, MSG_DONTWAIT);
      if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
        fprintf(stderr, "l2cap_ceiling: write to channel %d after %ld bytes: %s\n", i + 1,
                c->bytes, strerror(errno));
        return 1;
      }
      if (c->sdus == 0) c->first = now();
      c->bytes += w;
      c->sdus++;
      sent += w;
      sdus++;
    }
  }
  double written = now();
  /* The listener closes every channel once everything arrived (the ATT channel: it sends one
   * byte on it first). */
  int open = channel_count;
  while (open > 0) {
    struct pollfd p[MAX_CHANNELS];
    for (int i = 0; i < channel_count; i++) {
      p[i].fd = channels[i].open ? channels[i].fd : -1;
      p[i].events = POLLIN;
      p[i].revents = 0;
    }
    int ready = poll(p, (nfds_t)channel_count, idle_ms());
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      fprintf(stderr, "l2cap_ceiling: all written, but the listener left %d of %d channels "
              "open for %.0f s\n", open, channel_count, idle_seconds);
      return 1;
    }
    for (int i = 0; i < channel_count; i++) {
      if (!p[i].revents) continue;
      char byte;
      ssize_t n = recv(channels[i].fd, &byte, 1, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) &&
          !(p[i].revents & (POLLHUP | POLLERR)))
        continue;
      channels[i].open = 0; /* EOF, or an error: the listener closed it */
      channels[i].last = now();
      open--;
    }
  }
  double closed = now();
  printf("{\"channels\":%d,\"att\":%s,\"bytes\":%ld,\"sdus\":%ld,\"chunk\":%d,"
         "\"writeSeconds\":%.4f,\"seconds\":%.4f,\"bytesPerSecond\":%.0f,\"settleSeconds\":%.1f,"
         "\"sndMtu\":[",
         channel_count, att_first ? "true" : "false", sent, sdus, chunk, written - start,
         closed - start, sent / (closed - start), settle_seconds);
  for (int i = 0; i < channel_count; i++) printf("%s%d", i ? "," : "", channels[i].snd_mtu);
  printf("]}\n");
  fflush(stdout);
  for (int i = 0; i < channel_count; i++) close(channels[i].fd);
  free(data);
  return 0;
}

/* Takes the options out of argv (anywhere after the mode), leaving the positional arguments. */
static int take_options(int argc, char **argv) {
  int kept = 0;
  for (int i = 0; i < argc; i++) {
    const char *name = argv[i];
    if (strcmp(name, "--att") == 0) {
      att_first = 1;
      continue;
    }
    if (strncmp(name, "--", 2) == 0 && strlen(name) > 2) {
      if (i + 1 >= argc) {
        fprintf(stderr, "l2cap_ceiling: %s needs a value\n", name);
        exit(2);
      }
      const char *value = argv[++i];
      if (strcmp(name, "--channels") == 0) {
        channel_count = atoi(value);
        if (channel_count < 1 || channel_count > MAX_CHANNELS) {
          fprintf(stderr, "l2cap_ceiling: --channels: 1 to %d\n", MAX_CHANNELS);
          exit(2);
        }
      } else if (strcmp(name, "--settle") == 0) {
        settle_seconds = atof(value);
      } else if (strcmp(name, "--idle") == 0) {
        idle_seconds = atof(value);
        if (idle_seconds < 1) idle_seconds = 1;
      } else {
        fprintf(stderr, "l2cap_ceiling: unknown option %s\n", name);
        exit(2);
      }
      continue;
    }
    argv[kept++] = argv[i];
  }
  return kept;
}

int main(int argc, char **argv) {
  argc = take_options(argc, argv);
  if (argc >= 5 && strcmp(argv[1], "listen") == 0)
    return listen_mode(argv[2], (unsigned)strtoul(argv[3], NULL, 0), atol(argv[4]),
                       argc > 5 ? atoi(argv[5]) : 0);
  if (argc >= 7 && strcmp(argv[1], "send") == 0)
    return send_mode(argv[2], argv[3], (unsigned)strtoul(argv[4], NULL, 0), atol(argv[5]),
                     atoi(argv[6]), argc > 7 ? atoi(argv[7]) : 0);
  fprintf(stderr,
          "usage: l2cap_ceiling listen LOCAL PSM BYTES [MTU] [--channels K] [--att] [--idle S]\n"
          "       l2cap_ceiling send LOCAL REMOTE PSM BYTES CHUNK [MTU] [--channels K] [--att]"
          " [--settle S] [--idle S]\n");
  return 2;
}
