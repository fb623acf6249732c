// Reads PostgreSQL's binary COPY format, one CopyData message (one row) at a time: header, fields, end marker.

/**
 * The binary COPY format: an 11-byte signature, 32-bit flags and a header-extension length (then
 * that many bytes) before the first row; then per row a 16-bit field count and each field's 32-bit
 * length (-1 for NULL) and bytes; a field count of -1 ends the data. All numbers are big-endian.
 */
export const BINARY_COPY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1')

const EMPTY = Buffer.alloc(0)

/**
 * A cursor over the rows of one binary COPY. Hand it each CopyData message with `row()`, then read
 * that row's fields in order with `field()` or `int8()`. It keeps no bytes of its own: a message
 * lives in pg's read buffer, and is only read here before the next one arrives.
 */
export class BinaryCopyReader {
  /** The current row's message. */
  message: Buffer = EMPTY
  /** After field(): where the field's bytes start in `message` (they end at start + its length). */
  start = 0
  private at = 0
  private rowStart = 0
  private header = true

  /**
   * Starts reading a CopyData message: the number of fields of its row, or -1 when it holds no row
   * (the end marker, or a file header with nothing after it).
   */
  row(message: Buffer): number {
    let at = 0
    if (this.header) {
      if (!message.subarray(0, BINARY_COPY_SIGNATURE.length).equals(BINARY_COPY_SIGNATURE)) {
        throw new Error('binary COPY: the data does not start with the signature')
      }
      at = BINARY_COPY_SIGNATURE.length + 8 + message.readInt32BE(BINARY_COPY_SIGNATURE.length + 4)
      this.header = false
    }
    this.message = message
    if (at >= message.length) return -1
    const fields = message.readInt16BE(at)
    this.at = at + 2
    this.rowStart = this.at
    return fields
  }

  /** Back to the current row's first field, to read its fields again. */
  rewind(): void {
    this.at = this.rowStart
  }

  /** Moves to the row's next field: its length in bytes, or -1 for NULL. Its bytes start at `start`. */
  field(): number {
    const length = this.message.readInt32BE(this.at)
    this.start = this.at + 4
    this.at = length > 0 ? this.start + length : this.start
    if (this.at > this.message.length) throw new Error('binary COPY: a field runs past its row')
    return length
  }

  /** Reads the next field as a bigint; ids and epoch milliseconds fit 2^53, where a number is exact. */
  int8(): number {
    if (this.field() !== 8) throw new Error('binary COPY: a bigint field of unexpected length')
    return this.message.readInt32BE(this.start) * 0x1_0000_0000 + this.message.readUInt32BE(this.start + 4)
  }
}
