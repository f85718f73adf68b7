/** The caller's announcement does not match the presence schema (or is too large); nothing is published. */
export class InvalidPresenceAnnouncementError extends Error {
  override name = 'InvalidPresenceAnnouncementError';
}
