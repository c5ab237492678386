/* cli.h - what every part of rematctl shares: the exit statuses and the program's name.
 *
 * Not an API of its own: the parts are cli_conn (the connection), cli_fmt (pure
 * formatting and parsing), cli_show (human output of each reply), cli_watch (the live
 * view), cli_wait (remat set --wait: a change's outcome) and rematctl.c (arguments and
 * dispatch).
 */
#ifndef CLI_H
#define CLI_H

#define CLI_NAME "rematctl"

/* Exit statuses, documented in rematctl's usage text and the README. */
#define CLI_EXIT_OK    0 /* the command succeeded */
#define CLI_EXIT_FAIL  1 /* an error reply, or a command that failed here (spec unreadable) */
#define CLI_EXIT_USAGE 2 /* bad arguments */
#define CLI_EXIT_CONN  3 /* cannot connect, timeout, connection lost, protocol error */

#endif
