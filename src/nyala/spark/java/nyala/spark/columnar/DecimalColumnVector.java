package nyala.spark.columnar;

import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.vector.DecimalVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * An Arrow decimal column as Spark reads it, without a {@code BigDecimal} per value.
 *
 * <p>Spark's {@code ArrowColumnVector} answers {@code getDecimal} through Arrow's
 * {@code getObject}, which builds a {@code BigInteger} and a {@code BigDecimal} for every value and
 * then has Spark rescale it: in a full read of a table with one {@code decimal(22,1)} column that
 * was about a third of the read's CPU. A 128-bit value whose high half only extends the sign of
 * the low half is a long, and Spark keeps such decimals as a long too; the rest (values beyond
 * 18 digits) take the general path.
 */
final class DecimalColumnVector extends ColumnVector {
  private final DecimalVector vector;
  private final int scale;

  DecimalColumnVector(DecimalVector vector, DataType type) {
    super(type);
    this.vector = vector;
    this.scale = vector.getScale();
  }

  @Override
  public Decimal getDecimal(int rowId, int precision, int scale) {
    if (vector.isNull(rowId)) {
      return null;
    }
    if (scale == this.scale) {
      ArrowBuf data = vector.getDataBuffer();
      long offset = (long) rowId * DecimalVector.TYPE_WIDTH;
      long low = data.getLong(offset); // little-endian, as Arrow stores them
      long high = data.getLong(offset + 8);
      if (high == (low >> 63)) {
        return Decimal.apply(low, precision, scale);
      }
    }
    return Decimal.apply(vector.getObject(rowId), precision, scale);
  }

  @Override
  public boolean hasNull() {
    return vector.getNullCount() > 0;
  }

  @Override
  public int numNulls() {
    return vector.getNullCount();
  }

  @Override
  public boolean isNullAt(int rowId) {
    return vector.isNull(rowId);
  }

  @Override
  public void close() {
    // The batch's vectors belong to the reader's Arrow stream, which releases them.
  }

  private UnsupportedOperationException notDecimal() {
    return new UnsupportedOperationException("a decimal column has only decimals");
  }

  @Override
  public boolean getBoolean(int rowId) {
    throw notDecimal();
  }

  @Override
  public byte getByte(int rowId) {
    throw notDecimal();
  }

  @Override
  public short getShort(int rowId) {
    throw notDecimal();
  }

  @Override
  public int getInt(int rowId) {
    throw notDecimal();
  }

  @Override
  public long getLong(int rowId) {
    throw notDecimal();
  }

  @Override
  public float getFloat(int rowId) {
    throw notDecimal();
  }

  @Override
  public double getDouble(int rowId) {
    throw notDecimal();
  }

  @Override
  public ColumnarArray getArray(int rowId) {
    throw notDecimal();
  }

  @Override
  public ColumnarMap getMap(int rowId) {
    throw notDecimal();
  }

  @Override
  public UTF8String getUTF8String(int rowId) {
    throw notDecimal();
  }

  @Override
  public byte[] getBinary(int rowId) {
    throw notDecimal();
  }

  @Override
  public ColumnVector getChild(int ordinal) {
    throw notDecimal();
  }
}
